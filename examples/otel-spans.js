'use strict';
// OpenTelemetry spans for amqplib-rs from its tracing channels alone: no patching, no
// instrumentation package. A producer span per publish, whose context travels in the
// message's headers (W3C trace context), and a consumer span per delivery, its child.
//
//   const { trace } = require('@opentelemetry/api');
//   const stop = require('./examples/otel-spans').instrument(trace.getTracer('app'));

const dc = require('node:diagnostics_channel');
const api = require('@opentelemetry/api');

// Attribute names of OpenTelemetry's messaging conventions.
function attributes(ctx, operation) {
  return {
    'messaging.system': ctx.system,
    'messaging.operation.type': operation,
    'messaging.destination.name': ctx.destination,
    'messaging.rabbitmq.destination.routing_key': ctx.routingKey,
    'messaging.message.id': ctx.messageId,
    'messaging.message.conversation_id': ctx.conversationId,
    'messaging.message.body.size': ctx.bodySize,
    'server.address': ctx.serverAddress,
    'server.port': ctx.serverPort,
  };
}

const SPAN = Symbol('span');

// Subscribes; returns a function that unsubscribes.
function instrument(tracer) {
  const publish = {
    start(ctx) {
      const span = tracer.startSpan(`publish ${ctx.destination || '<default>'}`, { kind: api.SpanKind.PRODUCER, attributes: attributes(ctx, 'send') });
      ctx[SPAN] = span;
      // Sent with the message: the consumer's span becomes this one's child.
      api.propagation.inject(api.trace.setSpan(api.context.active(), span), ctx.properties.headers);
    },
    end(ctx) {
      if (!ctx.confirm) ctx[SPAN].end(); // a confirm channel's ends with the server's answer
    },
    error(ctx) {
      ctx[SPAN].setStatus({ code: api.SpanStatusCode.ERROR, message: ctx.error.message });
    },
    asyncEnd(ctx) {
      ctx[SPAN].end();
    },
  };
  const deliver = {
    start(ctx) {
      const parent = api.propagation.extract(api.ROOT_CONTEXT, ctx.message.properties.headers || {});
      ctx[SPAN] = tracer.startSpan(`process ${ctx.queue}`, { kind: api.SpanKind.CONSUMER, attributes: attributes(ctx, 'process') }, parent);
    },
    error(ctx) {
      ctx[SPAN].setStatus({ code: api.SpanStatusCode.ERROR, message: ctx.error.message });
    },
    end(ctx) {
      ctx[SPAN].end();
    },
  };
  dc.tracingChannel('amqplib:publish').subscribe(publish);
  dc.tracingChannel('amqplib:deliver').subscribe(deliver);
  return () => {
    dc.tracingChannel('amqplib:publish').unsubscribe(publish);
    dc.tracingChannel('amqplib:deliver').unsubscribe(deliver);
  };
}

module.exports = { instrument };
