'use strict';
// OpenTelemetry spans for amqplib-rs from its tracing channels alone: no patching, no
// instrumentation package. A producer span per publish, whose context travels in the
// message's headers (W3C trace context), and a consumer span per delivery, its child.
//
//   const { trace } = require('@opentelemetry/api');
//   const { instrument, StoreContextManager } = require('./examples/otel-spans');
//   const contextManager = new StoreContextManager();
//   provider.register({ contextManager }); // a NodeTracerProvider, say
//   const stop = instrument(trace.getTracer('app'), contextManager);
//
// With the context manager given, a consumer callback runs with its span active, so that the
// spans it makes are that span's children. Without one, the spans are made all the same, but
// the callback runs in whatever context the socket's read had (as with amqplib, whose
// callbacks, RPC and confirm callbacks too, keep no caller's context of their own).

const dc = require('node:diagnostics_channel');
const { AsyncLocalStorage } = require('node:async_hooks');
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

// OpenTelemetry's context kept in a store the tracing channels can enter (a tracing channel
// runs its traced function inside the stores bound to its start: that is how a consumer
// callback gets its span as the active context).
class StoreContextManager {
  constructor() {
    this.store = new AsyncLocalStorage();
  }

  active() {
    return this.store.getStore() ?? api.ROOT_CONTEXT;
  }

  with(context, fn, thisArg, ...args) {
    return this.store.run(context, () => fn.apply(thisArg, args));
  }

  bind(context, target) {
    if (typeof target !== 'function') return target;
    const manager = this;
    return function bound(...args) {
      return manager.with(context, target, this, ...args);
    };
  }

  enable() {
    return this;
  }

  disable() {
    this.store.disable();
    return this;
  }
}

// Subscribes; returns a function that unsubscribes. `contextManager` (a StoreContextManager,
// registered as OpenTelemetry's) makes each consumer callback run inside its span.
function instrument(tracer, contextManager) {
  const processSpan = (ctx) => {
    const parent = api.propagation.extract(api.ROOT_CONTEXT, ctx.message.properties.headers || {});
    ctx[SPAN] = tracer.startSpan(`process ${ctx.queue}`, { kind: api.SpanKind.CONSUMER, attributes: attributes(ctx, 'process') }, parent);
    return api.trace.setSpan(parent, ctx[SPAN]);
  };
  const publish = {
    start(ctx) {
      const span = tracer.startSpan(`publish ${ctx.destination || '<default>'}`, { kind: api.SpanKind.PRODUCER, attributes: attributes(ctx, 'send') });
      ctx[SPAN] = span;
      // Sent with the message: the consumer's span becomes this one's child.
      api.propagation.inject(api.trace.setSpan(api.context.active(), span), ctx.properties.headers);
    },
    end(ctx) {
      // A confirm channel's ends with the server's answer, unless the publish threw.
      if (!ctx.confirm || 'error' in ctx) ctx[SPAN].end();
    },
    error(ctx) {
      ctx[SPAN].setStatus({ code: api.SpanStatusCode.ERROR, message: ctx.error.message });
    },
    asyncEnd(ctx) {
      ctx[SPAN].end();
    },
  };
  // With a store, the span is made as the store is entered (before start's subscribers run).
  const deliverStart = dc.tracingChannel('amqplib:deliver').start;
  if (contextManager) deliverStart.bindStore(contextManager.store, processSpan);
  const deliver = {
    start(ctx) {
      if (!contextManager) processSpan(ctx);
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
    if (contextManager) deliverStart.unbindStore(contextManager.store);
  };
}

module.exports = { instrument, StoreContextManager };
