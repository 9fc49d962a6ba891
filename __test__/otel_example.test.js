'use strict';
// examples/otel-spans.js (issue 28): spans from the tracing channels alone, against the broker;
// the publish span is the parent of the consume span, its context carried in the headers, and
// a span made inside the consumer callback is the consume span's child.

const { it } = require('node:test');
const assert = require('node:assert');
const api = require('@opentelemetry/api');
const { NodeTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-node');
const { instrument, StoreContextManager } = require('../examples/otel-spans');
const { AMQP_URL, ours, uniqueName } = require('./helpers');

it('the example makes a producer span per publish and a consumer span per delivery, its child', async () => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new StoreContextManager();
  provider.register({ contextManager });
  const tracer = api.trace.getTracer('example');
  const stop = instrument(tracer, contextManager);
  try {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createConfirmChannel();
    const { queue } = await ch.assertQueue(uniqueName('otel'), { exclusive: true });
    await new Promise((resolve) => ch.sendToQueue(queue, Buffer.from('traced'), { messageId: 'one' }, resolve));
    const inside = await new Promise((resolve) =>
      ch.consume(queue, (msg) => {
        tracer.startSpan('work').end();
        ch.ack(msg);
        resolve(msg);
      }),
    );
    // A confirm publish that throws (the channel closed) still ends its span, as an error.
    await ch.close();
    assert.throws(() => ch.sendToQueue(queue, Buffer.from('late'), { messageId: 'late' }, () => {}), /Channel closed/);
    await model.close();
    assert.ok(inside.properties.headers.traceparent, 'the trace context travelled in the headers');
    const spans = exporter.getFinishedSpans();
    const producer = spans.find((s) => s.kind === api.SpanKind.PRODUCER);
    const consumer = spans.find((s) => s.kind === api.SpanKind.CONSUMER);
    assert.strictEqual(producer.name, 'publish <default>');
    assert.strictEqual(consumer.name, `process ${queue}`);
    assert.strictEqual(consumer.spanContext().traceId, producer.spanContext().traceId);
    assert.strictEqual(consumer.parentSpanContext?.spanId ?? consumer.parentSpanId, producer.spanContext().spanId);
    assert.strictEqual(producer.attributes['messaging.system'], 'rabbitmq');
    assert.strictEqual(producer.attributes['messaging.rabbitmq.destination.routing_key'], queue);
    assert.strictEqual(consumer.attributes['messaging.message.id'], 'one');
    assert.strictEqual(consumer.attributes['messaging.message.body.size'], 6);
    const work = spans.find((s) => s.name === 'work');
    assert.strictEqual(work.parentSpanContext?.spanId ?? work.parentSpanId, consumer.spanContext().spanId, "the consumer's work is its span's child");
    const late = spans.find((s) => s.kind === api.SpanKind.PRODUCER && s.attributes['messaging.message.id'] === 'late');
    assert.ok(late, 'the span of the publish that threw has ended');
    assert.strictEqual(late.status.code, api.SpanStatusCode.ERROR);
  } finally {
    stop();
    await provider.shutdown();
    api.trace.disable();
    api.propagation.disable();
    api.context.disable();
  }
});
