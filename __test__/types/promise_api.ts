// Type test for the promise API (`amqplib-rs`). Compiled by
// `tsc -p tsconfig.json`, never run.
//
// Part 1 proves that our declarations and amqplib 2.3.1's (the devDependency
// `amqplib-latest`) are the same: the module value types are assignable both
// ways, the sets of exported values are equal, and every exported type
// (including each member of the Options and Replies namespaces) is identical
// to amqplib's. Against amqplib 2.0.1 (`amqplib`), part 1b checks that the
// types the two versions share are identical, and that code typed against
// 2.0.1 accepts our module (2.3.1's changes only add, or narrow what comes
// back, e.g. cancel's reply).
// Part 2 exercises every method with typical arguments and checks the reply
// types; part 3 shows that wrong uses are rejected.

import * as ours from 'amqplib-rs';
import * as oursByPath from '../../index';
import * as theirs from 'amqplib-latest';
import type * as T from 'amqplib-latest';
import * as old from 'amqplib';
import type * as O from 'amqplib';
import type {
  Channel,
  ChannelModel,
  ConfirmChannel,
  Connection,
  ConsumeMessage,
  GetMessage,
  Message,
  MessageProperties,
  Options,
  RecoveringChannelModel,
  Replies,
  ServerProperties,
  XDeath,
} from 'amqplib-rs';

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/** true iff A and B are identical types (not merely mutually assignable). */
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
/** true iff A and B are assignable to each other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Compiles only when given `true`. */
type Ok<V extends true> = V;
/** Compiles only when given `false`. */
type No<V extends false> = V;

declare function use<V>(value: V): void;

// ---------------------------------------------------------------------------
// Part 1: our module matches amqplib 2.3.1's
// ---------------------------------------------------------------------------

// Ours stands wherever amqplib's module is expected. Not the other way round, by one
// addition (issue 25): ours also connects to a list of nodes, which amqplib's does not take.
const asTheirs: typeof theirs = ours;
// @ts-expect-error amqplib 2.3.1's connect takes no list of nodes
const asOurs: typeof ours = theirs;
use([asTheirs, asOurs]);

// Same set of exported values (no value missing on either side) ...
// One value more than amqplib's: counters() (issue 28).
type _ValueNames = Ok<Same<Exclude<keyof typeof ours, 'counters'>, keyof typeof theirs>>;
// ... and the package's self-reference resolves to the root index.d.ts.
type _SelfRef = Ok<Same<typeof ours, typeof oursByPath>>;

// Each exported value has the same type.
type _connect = Ok<Mutual<Parameters<typeof theirs.connect>[0], Exclude<ours.ConnectTarget, ReadonlyArray<unknown>>>>;
type _connectList = Ok<Same<Extract<ours.ConnectTarget, ReadonlyArray<unknown>>, ReadonlyArray<string | T.Options.Connect>>>;
type _credentials = Ok<Same<typeof ours.credentials, typeof theirs.credentials>>;
type _errorClass = Ok<Same<typeof ours.IllegalOperationError, typeof theirs.IllegalOperationError>>;
type _errorInstance = Ok<Same<ours.IllegalOperationError, theirs.IllegalOperationError>>;
type _errorCtorArgs = Ok<
  Same<
    ConstructorParameters<typeof ours.IllegalOperationError>,
    ConstructorParameters<typeof theirs.IllegalOperationError>
  >
>;

// Every exported type is identical to amqplib's.
type _Connection = Ok<Same<ours.Connection, T.Connection>>;
// A model has counters() more (issue 28), optional in the type: each fits the other's.
type _ChannelModelFits = Ok<Mutual<ours.ChannelModel, T.ChannelModel>>;
type _Channel = Ok<Same<ours.Channel, T.Channel>>;
type _ConfirmChannel = Ok<Same<ours.ConfirmChannel, T.ConfirmChannel>>;
type _RecoveryOptions = Ok<Mutual<Omit<ours.RecoveryOptions, 'shuffle' | 'preferredNode'>, Omit<T.RecoveryOptions, never>>>;
// Its 'connect' listener may take a second argument, which node (issue 25).
type _RecoveringChannelModel = Ok<Mutual<ours.RecoveringChannelModel, T.RecoveringChannelModel>>;
type _SocketOptions = Ok<Same<ours.SocketOptions, T.SocketOptions>>;
type _ChannelOptions = Ok<Same<ours.ChannelOptions, T.ChannelOptions>>;
type _Message = Ok<Same<ours.Message, T.Message>>;
type _GetMessage = Ok<Same<ours.GetMessage, T.GetMessage>>;
type _ConsumeMessage = Ok<Same<ours.ConsumeMessage, T.ConsumeMessage>>;
type _CommonMessageFields = Ok<Same<ours.CommonMessageFields, T.CommonMessageFields>>;
type _MessageFields = Ok<Same<ours.MessageFields, T.MessageFields>>;
type _GetMessageFields = Ok<Same<ours.GetMessageFields, T.GetMessageFields>>;
type _ConsumeMessageFields = Ok<Same<ours.ConsumeMessageFields, T.ConsumeMessageFields>>;
type _MessageProperties = Ok<Same<ours.MessageProperties, T.MessageProperties>>;
type _MessagePropertyHeaders = Ok<Same<ours.MessagePropertyHeaders, T.MessagePropertyHeaders>>;
type _XDeath = Ok<Same<ours.XDeath, T.XDeath>>;
type _ServerProperties = Ok<Same<ours.ServerProperties, T.ServerProperties>>;

type _OptionsConnect = Ok<Same<ours.Options.Connect, T.Options.Connect>>;
type _OptionsAssertQueue = Ok<Same<ours.Options.AssertQueue, T.Options.AssertQueue>>;
type _OptionsDeleteQueue = Ok<Same<ours.Options.DeleteQueue, T.Options.DeleteQueue>>;
type _OptionsAssertExchange = Ok<Same<ours.Options.AssertExchange, T.Options.AssertExchange>>;
type _OptionsDeleteExchange = Ok<Same<ours.Options.DeleteExchange, T.Options.DeleteExchange>>;
type _OptionsPublish = Ok<Same<ours.Options.Publish, T.Options.Publish>>;
type _OptionsConsume = Ok<Same<ours.Options.Consume, T.Options.Consume>>;
type _OptionsGet = Ok<Same<ours.Options.Get, T.Options.Get>>;

type _RepliesEmpty = Ok<Same<ours.Replies.Empty, T.Replies.Empty>>;
type _RepliesAssertQueue = Ok<Same<ours.Replies.AssertQueue, T.Replies.AssertQueue>>;
type _RepliesPurgeQueue = Ok<Same<ours.Replies.PurgeQueue, T.Replies.PurgeQueue>>;
type _RepliesDeleteQueue = Ok<Same<ours.Replies.DeleteQueue, T.Replies.DeleteQueue>>;
type _RepliesAssertExchange = Ok<Same<ours.Replies.AssertExchange, T.Replies.AssertExchange>>;
type _RepliesConsume = Ok<Same<ours.Replies.Consume, T.Replies.Consume>>;
type _RepliesCancel = Ok<Same<ours.Replies.Cancel, T.Replies.Cancel>>;

// Values typed with amqplib's types flow into ours and back.
declare const theirChannel: T.Channel;
declare const theirModel: T.ChannelModel;
declare const theirRecovering: T.RecoveringChannelModel;
const ourChannel: Channel = theirChannel;
const ourModel: ChannelModel = theirModel;
const ourRecovering: RecoveringChannelModel = theirRecovering;
const backToTheirs: [T.Channel, T.ChannelModel, T.RecoveringChannelModel] = [ourChannel, ourModel, ourRecovering];
use(backToTheirs);

// ---------------------------------------------------------------------------
// Part 1b: against amqplib 2.0.1, where the two versions agree
// ---------------------------------------------------------------------------

// Code typed against 2.0.1 takes our module and our objects as they are.
const asOld: typeof old = ours;
declare const oursChannel: Channel;
declare const oursModel: ChannelModel;
declare const oursRecovering: RecoveringChannelModel;
const intoOld: [O.Channel, O.ChannelModel, O.RecoveringChannelModel] = [oursChannel, oursModel, oursRecovering];
use([asOld, intoOld]);

type _oldValueNames = Ok<Same<Exclude<keyof typeof ours, 'counters'>, keyof typeof old>>;
type _oldCredentials = Ok<Same<typeof ours.credentials, typeof old.credentials>>;
type _oldErrorClass = Ok<Same<typeof ours.IllegalOperationError, typeof old.IllegalOperationError>>;
type _oldConnection = Ok<Same<ours.Connection, O.Connection>>;
type _oldSocketOptions = Ok<Same<ours.SocketOptions, O.SocketOptions>>;
type _oldChannelOptions = Ok<Same<ours.ChannelOptions, O.ChannelOptions>>;
type _oldMessage = Ok<Same<ours.Message, O.Message>>;
type _oldGetMessage = Ok<Same<ours.GetMessage, O.GetMessage>>;
type _oldConsumeMessage = Ok<Same<ours.ConsumeMessage, O.ConsumeMessage>>;
type _oldMessageProperties = Ok<Same<ours.MessageProperties, O.MessageProperties>>;
type _oldXDeath = Ok<Same<ours.XDeath, O.XDeath>>;
type _oldServerProperties = Ok<Same<ours.ServerProperties, O.ServerProperties>>;
type _oldOptionsAssertQueue = Ok<Same<ours.Options.AssertQueue, O.Options.AssertQueue>>;
type _oldOptionsDeleteQueue = Ok<Same<ours.Options.DeleteQueue, O.Options.DeleteQueue>>;
type _oldOptionsAssertExchange = Ok<Same<ours.Options.AssertExchange, O.Options.AssertExchange>>;
type _oldOptionsDeleteExchange = Ok<Same<ours.Options.DeleteExchange, O.Options.DeleteExchange>>;
type _oldOptionsPublish = Ok<Same<ours.Options.Publish, O.Options.Publish>>;
type _oldOptionsConsume = Ok<Same<ours.Options.Consume, O.Options.Consume>>;
type _oldOptionsGet = Ok<Same<ours.Options.Get, O.Options.Get>>;
type _oldRepliesEmpty = Ok<Same<ours.Replies.Empty, O.Replies.Empty>>;
type _oldRepliesAssertQueue = Ok<Same<ours.Replies.AssertQueue, O.Replies.AssertQueue>>;
type _oldRepliesPurgeQueue = Ok<Same<ours.Replies.PurgeQueue, O.Replies.PurgeQueue>>;
type _oldRepliesDeleteQueue = Ok<Same<ours.Replies.DeleteQueue, O.Replies.DeleteQueue>>;
type _oldRepliesAssertExchange = Ok<Same<ours.Replies.AssertExchange, O.Replies.AssertExchange>>;
type _oldRepliesConsume = Ok<Same<ours.Replies.Consume, O.Replies.Consume>>;

// What 2.3.1 changed, and nothing else: maxFrameSize in the connect options, ...
type _oldConnectOptions = Ok<Same<Omit<ours.Options.Connect, 'maxFrameSize'>, O.Options.Connect>>;
// ... cancel's reply, `{ consumerTag }` where 2.0.1 said Empty, ...
type _cancelReply = Ok<Same<Awaited<ReturnType<Channel['cancel']>>, Replies.Cancel>>;
type _oldCancelReply = Ok<Same<Awaited<ReturnType<O.Channel['cancel']>>, O.Replies.Empty>>;
// ... and the recovery options and waitForConnect (2.1.0 and 2.2.0).
type _newRecoveryOptions = Ok<
  Same<
    Exclude<keyof ours.RecoveryOptions, keyof O.RecoveryOptions>,
    'initialMaxRetries' | 'waitForConnect' | 'calculateDelay' | 'shuffle' | 'preferredNode' | 'credentials' | 'topology'
  >
>;
type _oldRecoveryOptionsKept = Ok<Same<Exclude<keyof O.RecoveryOptions, keyof ours.RecoveryOptions>, never>>;
type _newRecovering = Ok<Same<Exclude<keyof RecoveringChannelModel, keyof O.RecoveringChannelModel>, 'waitForConnect' | 'counters'>>;
// So values typed with 2.0.1's types no longer flow into ours where cancel is concerned.
type _oldChannelIntoOurs = No<Mutual<O.Channel, Channel>>;

// ---------------------------------------------------------------------------
// Part 2: every method, typical arguments, reply types
// ---------------------------------------------------------------------------

async function everyMethod(): Promise<void> {
  const content = Buffer.from('hello');

  // connect() overloads and credentials
  const model: ChannelModel = await ours.connect('amqp://guest:guest@localhost:5672/%2F');
  const viaObject: ChannelModel = await ours.connect(
    { protocol: 'amqp', hostname: 'localhost', port: 5672, vhost: '/', heartbeat: 30, frameMax: 131072, maxFrameSize: 0 },
    { noDelay: true, timeout: 10_000, keepAlive: true, clientProperties: { connection_name: 'types' } },
  );
  const withCreds: ChannelModel = await ours.connect('amqps://localhost', {
    credentials: ours.credentials.plain('user', 'secret'),
    ca: [Buffer.from('ca')],
    servername: 'localhost',
  });
  const amqplain: { mechanism: string; username: string; password: string } = ours.credentials.amqplain('u', 'p');
  const external: Buffer = ours.credentials.external().response();
  use([viaObject, withCreds, amqplain, external]);

  // A cluster's nodes, strings and objects mixed; recovery going round them.
  const cluster: ChannelModel = await ours.connect(['amqp://node1', { hostname: 'node2', port: 5673 }], { timeout: 1000 });
  const roundRobin: RecoveringChannelModel = await ours.connect(['amqp://node1', 'amqp://node2'], {
    recovery: { shuffle: true, preferredNode: 1 },
  });
  roundRobin.on('connect', (m: ChannelModel, which: { index: number; node: string }) => use([m, which.index, which.node]));
  use([cluster]);
  // Each attempt's credentials from a hook (an OAuth2 token), as a pair or a mechanism.
  const fetched: RecoveringChannelModel = await ours.connect('amqp://node1', {
    recovery: { credentials: async (which: { index: number; node: string }) => ({ username: which.node, password: 'jwt' }) },
  });
  const byCertificate: RecoveringChannelModel = await ours.connect('amqps://node1', { recovery: { credentials: () => ours.credentials.external() } });
  use([fetched, byCertificate]);

  // Counters (issue 28): a connection's, and the process's.
  const mine: number | undefined = model.counters?.().framesSent;
  const all: number = ours.counters().connections + ours.counters().confirmsOutstanding;
  const heartbeat: number | null = ours.counters().lastHeartbeatAt;
  use([mine, all, heartbeat]);

  const recovering: RecoveringChannelModel = await ours.connect('amqp://localhost', {
    recovery: {
      initialDelay: 100,
      maxDelay: 30_000,
      factor: 2,
      jitter: 0.2,
      maxRetries: 10,
      initialMaxRetries: 2,
      waitForConnect: false,
      calculateDelay: (attempt: number) => attempt * 1000,
      setup: async (m: ChannelModel) => {
        await m.createChannel();
      },
    },
  });
  const connected: RecoveringChannelModel = await recovering.waitForConnect();
  use(connected);
  const recoveringToo: RecoveringChannelModel = await ours.connect('amqp://localhost', { recovery: true });
  recovering
    .on('connect', (m: ChannelModel) => use(m))
    .on('disconnect', (err: Error) => use(err))
    .on('connect-failed', (err: Error) => use(err))
    .on('reconnect-scheduled', (info) => use<number>(info.attempt + info.delay))
    .on('reconnect-failed', (err: Error) => use(err))
    .on('blocked', (reason: string) => use(reason))
    .on('unblocked', () => {})
    .on('error', (err: Error) => use(err))
    .on('update-secret-ok', () => {});
  const rch: Channel = await recovering.createChannel({ highWaterMark: 1024 });
  const rcch: ConfirmChannel = await recovering.createConfirmChannel();
  await recovering.updateSecret(Buffer.from('token'), 'rotation');
  await recoveringToo.close();
  use([rch, rcch]);

  // ChannelModel
  const conn: Connection = model.connection;
  const server: ServerProperties = conn.serverProperties;
  const product: string = server.product;
  const copyright: string | undefined = server.copyright;
  use([product, copyright]);
  model
    .on('close', (err?: Error) => use(err))
    .on('error', (err: Error) => use(err))
    .on('blocked', (reason: string) => use(reason))
    .on('unblocked', () => {})
    .on('update-secret-ok', () => {})
    .on('handler-error', (err: Error, eventName: string) => use([err, eventName]))
    .on('something-else', (...args: any[]) => use(args));
  await model.updateSecret(Buffer.from('new-secret'), 'expired');

  // Channel
  const ch: Channel = await model.createChannel();
  const chWithOpts: Channel = await model.createChannel({ highWaterMark: 16 });
  const sameConn: Connection = ch.connection;
  use([chWithOpts, sameConn]);

  ch.on('close', () => {})
    .on('error', (err: Error) => use(err))
    .on('drain', () => {})
    .on('ack', (f) => use<[number, boolean]>([f.deliveryTag, f.multiple]))
    .on('nack', (f) => use<[number, boolean, boolean]>([f.deliveryTag, f.multiple, f.requeue]))
    .on('cancel', (f) => use<string>(f.consumerTag))
    .on('delivery', (m: ConsumeMessage) => use(m))
    .on('return', (m: Message) => use<string>(m.fields.routingKey))
    .on('handler-error', (err: Error, eventName: string) => use([err, eventName]));

  const q: Replies.AssertQueue = await ch.assertQueue('q', {
    messageTtl: 1,
    durable: true,
    exclusive: false,
    autoDelete: false,
    expires: 60_000,
    deadLetterExchange: 'dlx',
    deadLetterRoutingKey: 'dead',
    maxLength: 1000,
    maxPriority: 10,
    overflow: 'reject-publish',
    queueMode: 'lazy',
    arguments: { 'x-queue-type': 'classic' },
  });
  const anon: Replies.AssertQueue = await ch.assertQueue();
  const named: string = anon.queue;
  const counts: number = q.messageCount + q.consumerCount;
  use([named, counts]);
  const checked: Replies.AssertQueue = await ch.checkQueue('q');
  const purged: Replies.PurgeQueue = await ch.purgeQueue('q');
  const purgedCount: number = purged.messageCount;
  use([checked, purgedCount]);

  const ex: Replies.AssertExchange = await ch.assertExchange('logs', 'topic', {
    durable: true,
    internal: false,
    autoDelete: false,
    alternateExchange: 'ae',
    arguments: {},
  });
  const exName: string = ex.exchange;
  const exCustom: Replies.AssertExchange = await ch.assertExchange('delayed', 'x-delayed-message');
  const exChecked: Replies.Empty = await ch.checkExchange('logs');
  use([exName, exCustom, exChecked]);

  const bq: Replies.Empty = await ch.bindQueue('q', 'logs', 'a.*');
  const bqArgs: Replies.Empty = await ch.bindQueue('q', 'headers-ex', '', { 'x-match': 'any', k: 'v' });
  const ubq: Replies.Empty = await ch.unbindQueue('q', 'logs', 'a.*');
  const be: Replies.Empty = await ch.bindExchange('dest', 'logs', '#');
  const ube: Replies.Empty = await ch.unbindExchange('dest', 'logs', '#', {});
  use([bq, bqArgs, ubq, be, ube]);

  const publishOpts: Options.Publish = {
    persistent: true,
    mandatory: true,
    contentType: 'text/plain',
    contentEncoding: 'utf-8',
    headers: { 'x-trace': 'abc' },
    priority: 5,
    correlationId: 'c1',
    replyTo: 'amq.rabbitmq.reply-to',
    messageId: 'm1',
    timestamp: Date.now(),
    type: 'greeting',
    appId: 'types',
    userId: 'guest',
    expiration: 60_000,
    CC: ['a', 'b'],
    BCC: 'c',
    deliveryMode: 2,
  };
  const published: boolean = ch.publish('logs', 'a.b', content, publishOpts);
  const sent: boolean = ch.sendToQueue('q', content);
  use([published, sent]);

  const consumer: Replies.Consume = await ch.consume(
    'q',
    (msg: ConsumeMessage | null) => {
      if (msg === null) return;
      const tag: string = msg.fields.consumerTag;
      const body: Buffer = msg.content;
      const props: MessageProperties = msg.properties;
      const deaths: XDeath[] | undefined = props.headers?.['x-death'];
      const reason: 'rejected' | 'expired' | 'maxlen' | undefined = deaths?.[0]?.reason;
      use([tag, body, reason]);
      ch.ack(msg);
    },
    { noAck: false, exclusive: false, priority: 1, consumerTag: 'ctag', noLocal: false, arguments: {} },
  );
  const cancelled: Replies.Cancel = await ch.cancel(consumer.consumerTag);
  const cancelledTag: string = cancelled.consumerTag;
  use(cancelledTag);

  const got: GetMessage | false = await ch.get('q', { noAck: false });
  if (got !== false) {
    const remaining: number = got.fields.messageCount;
    use(remaining);
    ch.ack(got, true);
    ch.nack(got, false, true);
    ch.nack(got);
    ch.reject(got, false);
    ch.reject(got);
  }
  ch.ackAll();
  ch.nackAll(false);
  ch.nackAll();

  const pf: Replies.Empty = await ch.prefetch(10);
  const pfGlobal: Replies.Empty = await ch.prefetch(10, true);
  const rec: Replies.Empty = await ch.recover();
  use([pf, pfGlobal, rec]);

  const dq: Replies.DeleteQueue = await ch.deleteQueue('q', { ifUnused: true, ifEmpty: false });
  const dqCount: number = dq.messageCount;
  const de: Replies.Empty = await ch.deleteExchange('logs', { ifUnused: true });
  use([dqCount, de]);
  await ch.close();

  // ConfirmChannel
  const cch: ConfirmChannel = await model.createConfirmChannel();
  const cchOpts: ConfirmChannel = await model.createConfirmChannel({ highWaterMark: 32 });
  const asPlain: Channel = cch;
  use([cchOpts, asPlain]);
  const cpub: boolean = cch.publish('logs', 'k', content, { persistent: true }, (err: any, ok: Replies.Empty) => {
    use([err, ok]);
  });
  const cpubNoCb: boolean = cch.publish('logs', 'k', content);
  const csend: boolean = cch.sendToQueue('q', content, {}, (err) => use(err));
  use([cpub, cpubNoCb, csend]);
  const confirmed: void = await cch.waitForConfirms();
  use(confirmed);
  await cch.close();

  await model.close();

  // IllegalOperationError
  const e = new ours.IllegalOperationError('Channel closed', new Error().stack);
  const e2 = new ours.IllegalOperationError('Channel closed');
  const errName: 'IllegalOperationError' = e.name;
  const atChange: string | undefined = e2.stackAtStateChange;
  const isError: Error = e;
  use([errName, atChange, isError]);
}
use(everyMethod);

// ---------------------------------------------------------------------------
// Part 3: wrong uses are rejected
// ---------------------------------------------------------------------------

async function wrongUses(ch: Channel, cch: ConfirmChannel, model: ChannelModel): Promise<void> {
  // @ts-expect-error content must be a Buffer, not a string
  ch.sendToQueue('q', 'not a buffer');
  // @ts-expect-error messageTtl is a number
  await ch.assertQueue('q', { messageTtl: '1' });
  // @ts-expect-error unknown option
  await ch.assertQueue('q', { durabel: true });
  // @ts-expect-error checkQueue needs a queue name
  await ch.checkQueue();
  // @ts-expect-error assertQueue replies with a queue, not a consumer tag
  const wrongReply: Replies.Consume = await ch.assertQueue('q');
  // @ts-expect-error get() may resolve to false
  const notFalse: GetMessage = await ch.get('q');
  // @ts-expect-error the channel is not in confirm mode, no waitForConfirms
  await ch.waitForConfirms();
  // @ts-expect-error publish is synchronous and returns boolean
  const notPromise: Promise<boolean> = ch.publish('x', 'k', Buffer.alloc(0));
  // @ts-expect-error the confirm callback must take (err, ok)
  cch.publish('x', 'k', Buffer.alloc(0), {}, (a: string, b: string, c: string) => use([a, b, c]));
  // @ts-expect-error promise API: close takes no callback
  await model.close(() => {});
  // @ts-expect-error port is a number
  await ours.connect({ port: '5672' });
  // @ts-expect-error the error class needs a message
  new ours.IllegalOperationError();
  // @ts-expect-error plain() needs a username and a password
  ours.credentials.plain('only-user');
  // @ts-expect-error cancel's reply has no messageCount
  const notCount: number = (await ch.cancel('ctag')).messageCount;
  // @ts-expect-error calculateDelay returns a number of milliseconds
  await ours.connect('amqp://localhost', { recovery: { calculateDelay: () => 'soon' } });
  // @ts-expect-error maxFrameSize is a number
  await ours.connect({ maxFrameSize: '1MB' });
  // @ts-expect-error internal helper types are not part of the public surface
  type Hidden = import('amqplib-rs').RecoveryOptionsFor<ChannelModel>;
  use([wrongReply, notFalse, notPromise, notCount]);
}
use(wrongUses);
