// Type declarations for `amqplib-rs/callback_api`, the callback-style API.
//
// Every name declared here mirrors the public surface of amqplib 2.3.1's
// callback API so that code typed against `amqplib/callback_api` compiles
// unchanged against `amqplib-rs/callback_api`.

import type { EventEmitter } from 'node:events';
import type {
  ChannelOptions,
  ConsumeMessage,
  GetMessage,
  Message,
  Options,
  ReconnectSchedule,
  ConnectTarget,
  ConnectedNode,
  ConnectionCounters,
  ProcessCounters,
  RecoveryOptionsFor,
  Replies,
  TopologyEntity,
  ServerProperties,
  SocketOptions,
} from './lib/types';

export type {
  ChannelOptions,
  CommonMessageFields,
  ConnectTarget,
  ConnectedNode,
  ConnectionCounters,
  ProcessCounters,
  ConsumeMessage,
  ConsumeMessageFields,
  GetMessage,
  GetMessageFields,
  Message,
  MessageFields,
  MessageProperties,
  MessagePropertyHeaders,
  Options,
  Replies,
  ServerProperties,
  SocketOptions,
  TopologyEntity,
  TopologyRecoveryOptions,
  XDeath,
} from './lib/types';

/** Node-style completion callback carrying a broker reply. */
type ReplyCallback<T> = (err: Error, ok: T) => void;

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/** Connects to `amqp://localhost` with default settings. */
export declare function connect(callback: (err: Error, connection: Connection) => void): void;
/** Connects to the broker at `url` (a URL string or connection parameters). */
export declare function connect(
  url: ConnectTarget,
  callback: (err: Error, connection: Connection) => void,
): void;
/** Connects with explicit socket / TLS options. */
export declare function connect(
  url: ConnectTarget,
  socketOptions: SocketOptions,
  callback: (err: Error, connection: Connection) => void,
): void;
/** Connects with automatic reconnection; returns the recovering model synchronously. */
export declare function connect(
  url: ConnectTarget,
  socketOptions: SocketOptions & { recovery: RecoveryOptions | true },
  callback?: (err: Error, connection: RecoveringConnection) => void,
): RecoveringConnection;

// The credential builders and the error class are the very same objects in
// both entry points, so they are declared once (in the promise API) and
// re-exported here.
export { credentials, IllegalOperationError, counters } from './index';

// ---------------------------------------------------------------------------
// Connection level
// ---------------------------------------------------------------------------

/** An open connection, with callback-style channel creation. */
export interface Connection extends EventEmitter {
  /** The underlying protocol connection. */
  readonly connection: {
    readonly serverProperties: ServerProperties;
  };

  /** Closes the connection (and with it every channel). */
  close(callback?: (err: Error) => void): void;
  /** Opens a new channel; the channel is also returned synchronously. */
  createChannel(callback: (err: Error, channel: Channel) => void): Channel;
  createChannel(options: ChannelOptions, callback: (err: Error, channel: Channel) => void): Channel;
  /** Opens a new channel in publisher-confirm mode. */
  createConfirmChannel(callback: (err: Error, confirmChannel: ConfirmChannel) => void): ConfirmChannel;
  createConfirmChannel(
    options: ChannelOptions,
    callback: (err: Error, confirmChannel: ConfirmChannel) => void,
  ): ConfirmChannel;
  /** This connection's counters (amqplib-rs; optional in the type so that amqplib's models fit it). */
  counters?(): ConnectionCounters;
  /** Replaces the credential secret (connection.update-secret). */
  updateSecret(newSecret: Buffer, reason: string, callback?: (err: Error) => void): void;

  on(event: 'close', listener: (err?: Error) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'blocked', listener: (reason: string) => void): this;
  on(event: 'unblocked', listener: () => void): this;
  on(event: 'update-secret-ok', listener: () => void): this;
  on(event: 'handler-error', listener: (err: Error, eventName: string) => void): this;
  on(event: string, listener: (...args: any[]) => void): this;
}

/** Reconnection settings for `connect(url, { recovery }, cb)`. */
export interface RecoveryOptions extends RecoveryOptionsFor<Connection> {}

/** A connection handle that survives connection loss. */
export interface RecoveringConnection extends EventEmitter {
  /** Calls back (with this model) once the first connection has been made. */
  waitForConnect(callback: (err: Error, connection: RecoveringConnection) => void): void;
  /**
   * Stops reconnecting and closes the current connection, if any. amqplib-rs, with topology
   * recovery: `close({ drain }, callback)` is a drained close (see the promise API's).
   */
  close(
    optionsOrCallback?: ((err: Error) => void) | { drain: true | { timeout?: number } },
    callback?: (err: Error, outcome?: { drained: boolean }) => void,
  ): void;
  createChannel(callback: (err: Error, channel: Channel) => void): Channel;
  createChannel(options: ChannelOptions, callback: (err: Error, channel: Channel) => void): Channel;
  createConfirmChannel(callback: (err: Error, confirmChannel: ConfirmChannel) => void): ConfirmChannel;
  createConfirmChannel(
    options: ChannelOptions,
    callback: (err: Error, confirmChannel: ConfirmChannel) => void,
  ): ConfirmChannel;
  /** The counters of the connection open now, or null between connections (amqplib-rs; optional in the type so that amqplib's fit it). */
  counters?(): ConnectionCounters | null;
  updateSecret(newSecret: Buffer, reason: string, callback?: (err: Error) => void): void;

  on(event: 'connect', listener: (model: Connection, node: ConnectedNode) => void): this;
  on(event: 'disconnect', listener: (err: Error) => void): this;
  on(event: 'connect-failed', listener: (err: Error) => void): this;
  on(event: 'reconnect-scheduled', listener: (info: ReconnectSchedule) => void): this;
  on(event: 'reconnect-failed', listener: (err: Error) => void): this;
  on(event: 'blocked', listener: (reason: string) => void): this;
  on(event: 'unblocked', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'update-secret-ok', listener: () => void): this;
  on(event: string, listener: (...args: any[]) => void): this;
}

// ---------------------------------------------------------------------------
// Channels
// ---------------------------------------------------------------------------

/** An AMQP channel; broker operations report their reply through a callback. */
export interface Channel extends EventEmitter {
  readonly connection: Connection;

  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'drain', listener: () => void): this;
  on(event: 'ack', listener: (fields: { deliveryTag: number; multiple: boolean }) => void): this;
  on(event: 'nack', listener: (fields: { deliveryTag: number; multiple: boolean; requeue: boolean }) => void): this;
  on(event: 'cancel', listener: (fields: { consumerTag: string }) => void): this;
  on(event: 'delivery', listener: (message: ConsumeMessage) => void): this;
  on(event: 'return', listener: (message: Message) => void): this;
  on(event: 'handler-error', listener: (err: Error, eventName: string) => void): this;
  on(event: string, listener: (...args: any[]) => void): this;

  /** Closes the channel. */
  close(callback?: (err: Error) => void): void;

  // Queues
  /** Declares a queue; an empty or missing name asks the broker to pick one. */
  assertQueue(queue?: string, options?: Options.AssertQueue, callback?: ReplyCallback<Replies.AssertQueue>): void;
  /** Passive declare: fails (closing the channel) if the queue does not exist. */
  checkQueue(queue: string, callback?: ReplyCallback<Replies.AssertQueue>): void;
  deleteQueue(queue: string, options?: Options.DeleteQueue, callback?: ReplyCallback<Replies.DeleteQueue>): void;
  purgeQueue(queue: string, callback?: ReplyCallback<Replies.PurgeQueue>): void;
  bindQueue(queue: string, source: string, pattern: string, args?: any, callback?: ReplyCallback<Replies.Empty>): void;
  unbindQueue(
    queue: string,
    source: string,
    pattern: string,
    args?: any,
    callback?: ReplyCallback<Replies.Empty>,
  ): void;

  // Exchanges
  assertExchange(
    exchange: string,
    type: 'direct' | 'topic' | 'headers' | 'fanout' | 'match' | string,
    options?: Options.AssertExchange,
    callback?: ReplyCallback<Replies.AssertExchange>,
  ): void;
  /** Passive declare: fails (closing the channel) if the exchange does not exist. */
  checkExchange(exchange: string, callback?: ReplyCallback<Replies.Empty>): void;
  deleteExchange(exchange: string, options?: Options.DeleteExchange, callback?: ReplyCallback<Replies.Empty>): void;
  bindExchange(
    destination: string,
    source: string,
    pattern: string,
    args?: any,
    callback?: ReplyCallback<Replies.Empty>,
  ): void;
  unbindExchange(
    destination: string,
    source: string,
    pattern: string,
    args?: any,
    callback?: ReplyCallback<Replies.Empty>,
  ): void;

  // Publishing
  /** Publishes a message; returns false when the write buffer is full (wait for 'drain'). */
  publish(exchange: string, routingKey: string, content: Buffer, options?: Options.Publish): boolean;
  /** Publishes straight to a queue via the default exchange. */
  sendToQueue(queue: string, content: Buffer, options?: Options.Publish): boolean;

  // Consuming
  /** Starts a consumer; `onMessage` receives null if the broker cancels it. */
  consume(
    queue: string,
    onMessage: (msg: ConsumeMessage | null) => void,
    options?: Options.Consume,
    callback?: ReplyCallback<Replies.Consume>,
  ): void;
  cancel(consumerTag: string, callback?: ReplyCallback<Replies.Cancel>): void;
  /** Fetches one message; the callback gets false if the queue is empty. */
  get(queue: string, options?: Options.Get, callback?: ReplyCallback<GetMessage | false>): void;

  // Acknowledgements
  ack(message: Message, allUpTo?: boolean): void;
  ackAll(): void;
  nack(message: Message, allUpTo?: boolean, requeue?: boolean): void;
  nackAll(requeue?: boolean): void;
  reject(message: Message, requeue?: boolean): void;

  // Flow and recovery
  prefetch(count: number, global?: boolean, callback?: ReplyCallback<Replies.Empty>): void;
  recover(callback?: ReplyCallback<Replies.Empty>): void;
}

/** A channel in confirm mode: publishes can report broker acknowledgement. */
export interface ConfirmChannel extends Channel {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options?: Options.Publish,
    callback?: ReplyCallback<Replies.Empty>,
  ): boolean;
  sendToQueue(
    queue: string,
    content: Buffer,
    options?: Options.Publish,
    callback?: ReplyCallback<Replies.Empty>,
  ): boolean;

  /**
   * Calls back once every message published so far is confirmed, or with an error if any was
   * nacked or the channel closed with any unconfirmed. The callback is required.
   */
  waitForConfirms(callback: (err?: Error) => void): void;
}
