// Type test for the callback API (`amqplib-rs/callback_api`). Compiled by
// `tsc -p tsconfig.json`, never run.
//
// Part 1 proves that our declarations and amqplib 2.3.1's
// `amqplib/callback_api` (the devDependency `amqplib-latest`) are the same:
// the module value types are assignable both ways, the sets of exported
// values are equal, and every exported type is identical to amqplib's.
// Part 1b checks against amqplib 2.0.1 what the two versions share, and that
// code typed against 2.0.1 accepts our module. Part 2 exercises every method
// with typical arguments and checks the types handed to callbacks; part 3
// shows that wrong uses are rejected.

import * as ours from 'amqplib-rs/callback_api';
import * as oursByPath from '../../callback_api';
import * as oursPromise from 'amqplib-rs';
import * as theirs from 'amqplib-latest/callback_api';
import type * as T from 'amqplib-latest/callback_api';
import * as old from 'amqplib/callback_api';
import type * as O from 'amqplib/callback_api';
import type {
  Channel,
  ConfirmChannel,
  Connection,
  ConsumeMessage,
  GetMessage,
  Message,
  Options,
  RecoveringConnection,
  Replies,
  ServerProperties,
} from 'amqplib-rs/callback_api';

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/** true iff A and B are identical types (not merely mutually assignable). */
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
/** true iff A and B are assignable to each other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Compiles only when given `true`. */
type Ok<V extends true> = V;

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

// Same set of exported values, and the self-reference resolves to the root file.
// One value more than amqplib's: counters() (issue 28).
type _ValueNames = Ok<Same<Exclude<keyof typeof ours, 'counters'>, keyof typeof theirs>>;
type _SelfRef = Ok<Same<typeof ours, typeof oursByPath>>;

// Each exported value has the same type.
type _connect = Ok<Mutual<Parameters<typeof theirs.connect>[0], Exclude<ours.ConnectTarget, ReadonlyArray<unknown>>>>;
type _connectList = Ok<Same<Extract<ours.ConnectTarget, ReadonlyArray<unknown>>, ReadonlyArray<string | T.Options.Connect>>>;
type _credentials = Ok<Same<typeof ours.credentials, typeof theirs.credentials>>;
type _errorClass = Ok<Same<typeof ours.IllegalOperationError, typeof theirs.IllegalOperationError>>;
type _errorInstance = Ok<Same<ours.IllegalOperationError, theirs.IllegalOperationError>>;
// Both entry points hand out the very same error class and credential builders.
type _sharedError = Ok<Same<typeof ours.IllegalOperationError, typeof oursPromise.IllegalOperationError>>;
type _sharedCredentials = Ok<Same<typeof ours.credentials, typeof oursPromise.credentials>>;

// Every exported type is identical to amqplib's.
// A connection has counters() more (issue 28), optional in the type: each fits the other's.
type _ConnectionFits = Ok<Mutual<ours.Connection, T.Connection>>;
type _Channel = Ok<Mutual<ours.Channel, T.Channel>>;
type _ConfirmChannel = Ok<Mutual<ours.ConfirmChannel, T.ConfirmChannel>>;
type _RecoveryOptions = Ok<Mutual<Omit<ours.RecoveryOptions, 'shuffle' | 'preferredNode'>, Omit<T.RecoveryOptions, never>>>;
// Its 'connect' listener may take a second argument, which node (issue 25).
type _RecoveringConnection = Ok<Mutual<ours.RecoveringConnection, T.RecoveringConnection>>;
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
declare const theirConnection: T.Connection;
declare const theirChannel: T.ConfirmChannel;
declare const theirRecovering: T.RecoveringConnection;
const ourConnection: Connection = theirConnection;
const ourChannel: ConfirmChannel = theirChannel;
const ourRecovering: RecoveringConnection = theirRecovering;
const backToTheirs: [T.Connection, T.ConfirmChannel, T.RecoveringConnection] = [ourConnection, ourChannel, ourRecovering];
use(backToTheirs);

// ---------------------------------------------------------------------------
// Part 1b: against amqplib 2.0.1, where the two versions agree
// ---------------------------------------------------------------------------

// Code typed against 2.0.1 takes our module and our objects as they are.
const asOld: typeof old = ours;
const intoOld: [O.Connection, O.ConfirmChannel, O.RecoveringConnection] = [ourConnection, ourChannel, ourRecovering];
use([asOld, intoOld]);

type _oldValueNames = Ok<Same<Exclude<keyof typeof ours, 'counters'>, keyof typeof old>>;
type _oldCredentials = Ok<Same<typeof ours.credentials, typeof old.credentials>>;
type _oldErrorClass = Ok<Same<typeof ours.IllegalOperationError, typeof old.IllegalOperationError>>;
type _oldSocketOptions = Ok<Same<ours.SocketOptions, O.SocketOptions>>;
type _oldChannelOptions = Ok<Same<ours.ChannelOptions, O.ChannelOptions>>;
type _oldMessage = Ok<Same<ours.Message, O.Message>>;
type _oldGetMessage = Ok<Same<ours.GetMessage, O.GetMessage>>;
type _oldConsumeMessage = Ok<Same<ours.ConsumeMessage, O.ConsumeMessage>>;
type _oldMessageProperties = Ok<Same<ours.MessageProperties, O.MessageProperties>>;
type _oldServerProperties = Ok<Same<ours.ServerProperties, O.ServerProperties>>;
type _oldOptionsPublish = Ok<Same<ours.Options.Publish, O.Options.Publish>>;
type _oldOptionsAssertQueue = Ok<Same<ours.Options.AssertQueue, O.Options.AssertQueue>>;
type _oldOptionsConsume = Ok<Same<ours.Options.Consume, O.Options.Consume>>;
type _oldRepliesConsume = Ok<Same<ours.Replies.Consume, O.Replies.Consume>>;
type _oldConnectOptions = Ok<Same<Omit<ours.Options.Connect, 'maxFrameSize'>, O.Options.Connect>>;
// What 2.3.1 changed here: cancel's reply, and waitForConfirms' callback, now required.
type CancelCallback<C extends { cancel(tag: string, cb?: any): void }> = NonNullable<Parameters<C['cancel']>[1]>;
type _cancelReply = Ok<Same<Parameters<CancelCallback<Channel>>[1], Replies.Cancel>>;
type _oldCancelReply = Ok<Same<Parameters<CancelCallback<O.Channel>>[1], O.Replies.Empty>>;
type _confirmCallbackRequired = Ok<Same<Parameters<ConfirmChannel['waitForConfirms']>, [callback: (err?: Error) => void]>>;
type _newRecovering = Ok<Same<Exclude<keyof RecoveringConnection, keyof O.RecoveringConnection>, 'waitForConnect' | 'counters'>>;

// ---------------------------------------------------------------------------
// Part 2: every method, typical arguments, callback types
// ---------------------------------------------------------------------------

function onError(err: Error | undefined): void {
  if (err) throw err;
}

function everyMethod(): void {
  const content = Buffer.from('hello');

  // connect() overloads
  ours.connect((err: Error, conn: Connection) => use([err, conn]));
  ours.connect({ hostname: 'localhost', port: 5672, vhost: '/', heartbeat: 30 }, (err, conn) => {
    use<[Error, Connection]>([err, conn]);
  });
  const noReturn: void = ours.connect(
    'amqps://localhost',
    { credentials: ours.credentials.external(), cert: Buffer.from('c'), key: Buffer.from('k'), noDelay: true },
    (err, conn) => use<[Error, Connection]>([err, conn]),
  );
  use(noReturn);
  const creds: { username: string; password: string } = ours.credentials.amqplain('u', 'p');
  const plainBytes: Buffer = ours.credentials.plain('u', 'p').response();
  use([creds, plainBytes]);

  // Recovering connection: callback typed explicitly so the recovery overload is chosen.
  const recovering: RecoveringConnection = ours.connect(
    'amqp://localhost',
    {
      recovery: {
        initialDelay: 100,
        maxDelay: 30_000,
        factor: 2,
        jitter: 0.2,
        maxRetries: 5,
        initialMaxRetries: 1,
        waitForConnect: false,
        calculateDelay: (attempt: number) => Math.min(attempt * 500, 5000),
        setup: (model: Connection, done: (err?: Error) => void) => {
          model.createChannel((err) => done(err));
        },
      },
    },
    (err: Error, rc: RecoveringConnection) => use([err, rc]),
  );
  recovering
    .on('connect', (model: Connection) => use(model))
    .on('disconnect', (err: Error) => use(err))
    .on('connect-failed', (err: Error) => use(err))
    .on('reconnect-scheduled', (info) => use<[number, number, Error]>([info.attempt, info.delay, info.error]))
    .on('reconnect-failed', (err: Error) => use(err))
    .on('blocked', (reason: string) => use(reason))
    .on('unblocked', () => {})
    .on('error', (err: Error) => use(err))
    .on('update-secret-ok', () => {});
  const rch: Channel = recovering.createChannel((err, ch: Channel) => use([err, ch]));
  const rchOpts: Channel = recovering.createChannel({ highWaterMark: 8 }, (err, ch) => use([err, ch]));
  const rcch: ConfirmChannel = recovering.createConfirmChannel((err, ch: ConfirmChannel) => use([err, ch]));
  const rcchOpts: ConfirmChannel = recovering.createConfirmChannel({}, (err, ch) => use([err, ch]));
  recovering.waitForConnect((err: Error, rc: RecoveringConnection) => use([err, rc]));
  // The callback of a recovering connect is optional.
  const noCallback: RecoveringConnection = ours.connect('amqp://localhost', { recovery: true });
  const overNodes: RecoveringConnection = ours.connect(['amqp://node1', { hostname: 'node2' }], { recovery: { shuffle: true } });
  ours.connect(['amqp://node1', 'amqp://node2'], (err: Error, conn: Connection) => use([err, conn]));
  use([overNodes]);
  use(noCallback);
  recovering.updateSecret(Buffer.from('token'), 'rotation', onError);
  recovering.close(onError);
  use([rch, rchOpts, rcch, rcchOpts]);

  ours.connect('amqp://localhost', (err, conn) => {
    if (err) throw err;

    // Connection
    const server: ServerProperties = conn.connection.serverProperties;
    const version: string = server.version;
    use(version);
    conn
      .on('close', (e?: Error) => use(e))
      .on('error', (e: Error) => use(e))
      .on('blocked', (reason: string) => use(reason))
      .on('unblocked', () => {})
      .on('update-secret-ok', () => {})
      .on('handler-error', (e: Error, eventName: string) => use([e, eventName]))
      .on('anything', (...args: any[]) => use(args));
    conn.updateSecret(Buffer.from('secret'), 'expired', onError);
    conn.updateSecret(Buffer.from('secret'), 'expired');

    const withOpts: Channel = conn.createChannel({ highWaterMark: 16 }, (e, c) => use([e, c]));
    use(withOpts);

    // Channel
    const returned: Channel = conn.createChannel((e: Error, ch: Channel) => {
      onError(e);
      const back: Connection = ch.connection;
      use(back);

      ch.on('close', () => {})
        .on('error', (x: Error) => use(x))
        .on('drain', () => {})
        .on('ack', (f) => use<[number, boolean]>([f.deliveryTag, f.multiple]))
        .on('nack', (f) => use<boolean>(f.requeue))
        .on('cancel', (f) => use<string>(f.consumerTag))
        .on('delivery', (m: ConsumeMessage) => use(m))
        .on('return', (m: Message) => use<Buffer>(m.content))
        .on('handler-error', (x: Error, eventName: string) => use([x, eventName]));

      ch.assertQueue('q', { messageTtl: 1, durable: true, deadLetterExchange: 'dlx' }, (x, ok) => {
        const q: Replies.AssertQueue = ok;
        use<[Error, string, number, number]>([x, q.queue, q.messageCount, q.consumerCount]);
      });
      ch.assertQueue();
      ch.assertQueue('', { exclusive: true });
      ch.checkQueue('q', (x, ok: Replies.AssertQueue) => use([x, ok]));
      ch.checkQueue('q');
      ch.purgeQueue('q', (x, ok: Replies.PurgeQueue) => use<number>(ok.messageCount));
      ch.deleteQueue('q', { ifUnused: true, ifEmpty: true }, (x, ok: Replies.DeleteQueue) => use<number>(ok.messageCount));
      ch.deleteQueue('q');

      ch.assertExchange('logs', 'fanout', { durable: false }, (x, ok: Replies.AssertExchange) => use<string>(ok.exchange));
      ch.assertExchange('custom', 'x-consistent-hash');
      ch.checkExchange('logs', (x, ok: Replies.Empty) => use([x, ok]));
      ch.deleteExchange('logs', { ifUnused: false }, (x, ok: Replies.Empty) => use([x, ok]));
      ch.deleteExchange('logs');

      ch.bindQueue('q', 'logs', '', {}, (x, ok: Replies.Empty) => use([x, ok]));
      ch.bindQueue('q', 'logs', 'key');
      ch.unbindQueue('q', 'logs', 'key', undefined, (x, ok) => use([x, ok]));
      ch.bindExchange('dest', 'logs', '#', { 'x-match': 'all' }, (x, ok) => use([x, ok]));
      ch.unbindExchange('dest', 'logs', '#');

      const publishOpts: Options.Publish = { persistent: true, headers: { a: 1 }, expiration: '1000', priority: 1 };
      const published: boolean = ch.publish('logs', '', content, publishOpts);
      const sent: boolean = ch.sendToQueue('q', content, { contentType: 'application/json' });
      use([published, sent]);

      ch.consume(
        'q',
        (msg: ConsumeMessage | null) => {
          if (msg) {
            const tag: string = msg.fields.consumerTag;
            const redelivered: boolean = msg.fields.redelivered;
            use([tag, redelivered]);
            ch.ack(msg);
          }
        },
        { noAck: false, consumerTag: 'ctag' },
        (x, ok: Replies.Consume) => {
          const tag: string = ok.consumerTag;
          ch.cancel(tag, (y, cancelled: Replies.Cancel) => use<[Error, string]>([y, cancelled.consumerTag]));
        },
      );
      ch.consume('q', (msg) => use(msg));

      ch.get('q', { noAck: false }, (x, msg: GetMessage | false) => {
        if (msg === false) return;
        const remaining: number = msg.fields.messageCount;
        use(remaining);
        ch.ack(msg, false);
        ch.nack(msg, false, false);
        ch.nack(msg);
        ch.reject(msg, true);
        ch.reject(msg);
      });
      ch.get('q');
      ch.ackAll();
      ch.nackAll(true);
      ch.nackAll();

      ch.prefetch(10, false, (x, ok: Replies.Empty) => use([x, ok]));
      ch.prefetch(1);
      ch.recover((x, ok: Replies.Empty) => use([x, ok]));
      ch.recover();
      ch.close(onError);
      ch.close();
    });
    use(returned);

    // ConfirmChannel
    const confirmReturned: ConfirmChannel = conn.createConfirmChannel((e: Error, cch: ConfirmChannel) => {
      onError(e);
      const asPlain: Channel = cch;
      use(asPlain);
      const p: boolean = cch.publish('logs', 'k', content, { mandatory: true }, (x: Error, ok: Replies.Empty) => {
        use([x, ok]);
      });
      const pNoCb: boolean = cch.publish('logs', 'k', content);
      const s: boolean = cch.sendToQueue('q', content, {}, (x) => onError(x));
      use([p, pNoCb, s]);
      cch.waitForConfirms((x?: Error) => onError(x));
    });
    const confirmWithOpts: ConfirmChannel = conn.createConfirmChannel({ highWaterMark: 4 }, (e, c) => use([e, c]));
    use([confirmReturned, confirmWithOpts]);

    conn.close(onError);
    conn.close();
  });

  // IllegalOperationError
  const e = new ours.IllegalOperationError('Connection closed', 'stack');
  const errName: 'IllegalOperationError' = e.name;
  const atChange: string | undefined = e.stackAtStateChange;
  use([errName, atChange]);
}
use(everyMethod);

// ---------------------------------------------------------------------------
// Part 3: wrong uses are rejected
// ---------------------------------------------------------------------------

function wrongUses(conn: Connection, ch: Channel, cch: ConfirmChannel): void {
  // @ts-expect-error callback API: createChannel needs a callback
  conn.createChannel();
  // @ts-expect-error callback API: operations return nothing, not a promise
  const notPromise: Promise<Replies.AssertQueue> = ch.assertQueue('q');
  // @ts-expect-error the assertQueue reply is not a consume reply
  ch.assertQueue('q', {}, (err: Error, ok: Replies.Consume) => use([err, ok]));
  // @ts-expect-error content must be a Buffer
  ch.publish('x', 'k', { not: 'a buffer' });
  // @ts-expect-error prefetch count is a number
  ch.prefetch('10');
  // @ts-expect-error get() may deliver false, so the message type must allow it
  ch.get('q', {}, (err: Error, msg: GetMessage) => use([err, msg]));
  // @ts-expect-error plain channels have no waitForConfirms
  ch.waitForConfirms();
  // @ts-expect-error waitForConfirms takes a callback, not options
  cch.waitForConfirms({});
  // @ts-expect-error waitForConfirms needs its callback (amqplib 2.2.1)
  cch.waitForConfirms();
  // @ts-expect-error waitForConnect needs its callback
  ours.connect('amqp://localhost', { recovery: true }).waitForConnect();
  // @ts-expect-error the internal callback alias is not exported
  type Hidden = import('amqplib-rs/callback_api').ReplyCallback<Replies.Empty>;
  // @ts-expect-error connect needs a callback in the callback API
  ours.connect('amqp://localhost');
  use(notPromise);
}
use(wrongUses);
