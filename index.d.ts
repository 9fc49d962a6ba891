// Type declarations for `amqplib-rs`, the promise-based API.
//
// Every name declared here mirrors the public surface of amqplib 2.3.1's
// promise API so that code typed against amqplib compiles unchanged against
// amqplib-rs.

import type { EventEmitter } from 'node:events';
import type {
  ChannelOptions,
  ConsumeMessage,
  CredentialFactories,
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

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/**
 * Opens a connection that transparently reconnects (with backoff) whenever
 * it is lost, re-running `recovery.setup` each time.
 */
export declare function connect(
  url: ConnectTarget,
  socketOptions: SocketOptions & { recovery: RecoveryOptions | true },
): Promise<RecoveringChannelModel>;
/**
 * Opens a connection to the broker at `url` (an `amqp://` / `amqps://` URL or
 * an object of connection parameters) and resolves once the AMQP handshake
 * has completed.
 */
export declare function connect(url: ConnectTarget, socketOptions?: SocketOptions): Promise<ChannelModel>;

/** Every connection's counters, summed over the process (not in amqplib). */
export declare function counters(): ProcessCounters;

/** Builders for the supported SASL authentication mechanisms. */
export declare const credentials: CredentialFactories;

/**
 * Thrown (or passed to a callback) when an operation is attempted on a
 * channel or connection that is closing or already closed.
 */
export declare class IllegalOperationError extends Error {
  name: 'IllegalOperationError';
  /** Stack captured when the object entered the state that made the call illegal. */
  stackAtStateChange: string | undefined;
  constructor(msg: string, stack?: string);
}

// ---------------------------------------------------------------------------
// Connection level
// ---------------------------------------------------------------------------

/** The underlying AMQP connection, as exposed on models and channels. */
export interface Connection {
  /** What the broker said about itself in connection.start. */
  readonly serverProperties: ServerProperties;
}

/** A connection together with the means to open channels on it. */
export interface ChannelModel extends EventEmitter {
  readonly connection: Connection;

  /** Closes the connection (and with it every channel). */
  close(): Promise<void>;
  /** Opens a new channel. */
  createChannel(options?: ChannelOptions): Promise<Channel>;
  /** Opens a new channel in publisher-confirm mode. */
  createConfirmChannel(options?: ChannelOptions): Promise<ConfirmChannel>;
  /** This connection's counters (amqplib-rs; optional in the type so that amqplib's models fit it). */
  counters?(): ConnectionCounters;
  /** Replaces the credential secret (connection.update-secret). */
  updateSecret(newSecret: Buffer, reason: string): Promise<void>;

  on(event: 'close', listener: (err?: Error) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'blocked', listener: (reason: string) => void): this;
  on(event: 'unblocked', listener: () => void): this;
  on(event: 'update-secret-ok', listener: () => void): this;
  on(event: 'handler-error', listener: (err: Error, eventName: string) => void): this;
  on(event: string, listener: (...args: any[]) => void): this;
}

/** Reconnection settings for `connect(url, { recovery })`. */
export interface RecoveryOptions extends RecoveryOptionsFor<ChannelModel> {}

/**
 * A model that survives connection loss. Channels created from it belong to
 * the connection current at the time of the call.
 */
export interface RecoveringChannelModel extends EventEmitter {
  /** Resolves (with this model) once the first connection has been made. */
  waitForConnect(): Promise<this>;
  /** Stops reconnecting and closes the current connection, if any. */
  close(): Promise<void>;
  /**
   * amqplib-rs, with topology recovery: a drained close. The channels' consumers are cancelled,
   * their callbacks in flight (those returning a promise) finish and the deliveries they were
   * handed are acked, outstanding confirms come, then the connection closes; within
   * `timeout` (ms, default 10000), past which it closes all the same (`drained: false`).
   */
  close(options: { drain: true | { timeout?: number } }): Promise<{ drained: boolean } | void>;
  createChannel(options?: ChannelOptions): Promise<Channel>;
  createConfirmChannel(options?: ChannelOptions): Promise<ConfirmChannel>;
  /** The counters of the connection open now, or null between connections (amqplib-rs; optional in the type so that amqplib's fit it). */
  counters?(): ConnectionCounters | null;
  updateSecret(newSecret: Buffer, reason: string): Promise<void>;

  on(event: 'connect', listener: (model: ChannelModel, node: ConnectedNode) => void): this;
  on(event: 'disconnect', listener: (err: Error) => void): this;
  on(event: 'connect-failed', listener: (err: Error) => void): this;
  on(event: 'reconnect-scheduled', listener: (info: ReconnectSchedule) => void): this;
  on(event: 'reconnect-failed', listener: (err: Error) => void): this;
  on(event: 'blocked', listener: (reason: string) => void): this;
  on(event: 'unblocked', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'update-secret-ok', listener: () => void): this;
  /** Topology recovery: a server-named queue declared again got a new name. */
  on(event: 'queue-renamed', listener: (names: { from: string; to: string }) => void): this;
  /** Topology recovery without `onError`: a replayed entity was refused and skipped. */
  on(event: 'topology-error', listener: (err: Error, entity: TopologyEntity) => void): this;
  on(event: string, listener: (...args: any[]) => void): this;
}

// ---------------------------------------------------------------------------
// Channels
// ---------------------------------------------------------------------------

/** An AMQP channel; every broker operation returns a promise of its reply. */
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
  close(): Promise<void>;

  // Queues
  /** Declares a queue; an empty or missing name asks the broker to pick one. */
  assertQueue(queue?: string, options?: Options.AssertQueue): Promise<Replies.AssertQueue>;
  /** Passive declare: fails (closing the channel) if the queue does not exist. */
  checkQueue(queue: string): Promise<Replies.AssertQueue>;
  deleteQueue(queue: string, options?: Options.DeleteQueue): Promise<Replies.DeleteQueue>;
  purgeQueue(queue: string): Promise<Replies.PurgeQueue>;
  bindQueue(queue: string, source: string, pattern: string, args?: any): Promise<Replies.Empty>;
  unbindQueue(queue: string, source: string, pattern: string, args?: any): Promise<Replies.Empty>;

  // Exchanges
  assertExchange(
    exchange: string,
    type: 'direct' | 'topic' | 'headers' | 'fanout' | 'match' | string,
    options?: Options.AssertExchange,
  ): Promise<Replies.AssertExchange>;
  /** Passive declare: fails (closing the channel) if the exchange does not exist. */
  checkExchange(exchange: string): Promise<Replies.Empty>;
  deleteExchange(exchange: string, options?: Options.DeleteExchange): Promise<Replies.Empty>;
  bindExchange(destination: string, source: string, pattern: string, args?: any): Promise<Replies.Empty>;
  unbindExchange(destination: string, source: string, pattern: string, args?: any): Promise<Replies.Empty>;

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
  ): Promise<Replies.Consume>;
  /** Cancels a consumer; resolves with the server's reply. */
  cancel(consumerTag: string): Promise<Replies.Cancel>;
  /** Fetches one message, or resolves to false if the queue is empty. */
  get(queue: string, options?: Options.Get): Promise<GetMessage | false>;

  // Acknowledgements
  ack(message: Message, allUpTo?: boolean): void;
  ackAll(): void;
  nack(message: Message, allUpTo?: boolean, requeue?: boolean): void;
  nackAll(requeue?: boolean): void;
  reject(message: Message, requeue?: boolean): void;

  // Flow and recovery
  prefetch(count: number, global?: boolean): Promise<Replies.Empty>;
  recover(): Promise<Replies.Empty>;
}

/** A channel in confirm mode: publishes can report broker acknowledgement. */
export interface ConfirmChannel extends Channel {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options?: Options.Publish,
    callback?: (err: any, ok: Replies.Empty) => void,
  ): boolean;
  sendToQueue(
    queue: string,
    content: Buffer,
    options?: Options.Publish,
    callback?: (err: any, ok: Replies.Empty) => void,
  ): boolean;

  /** Resolves once every message published so far is confirmed; rejects if any was nacked. */
  waitForConfirms(): Promise<void>;
}
