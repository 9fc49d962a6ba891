// Shared type declarations for amqplib-rs.
//
// These types describe the data that flows through both public entry points
// (`amqplib-rs` and `amqplib-rs/callback_api`): option bags accepted by the
// channel and connection methods, the replies the broker sends back, and the
// shape of delivered messages. Both `index.d.ts` and `callback_api.d.ts`
// re-export the public subset of this file, so consumers never import it
// directly.

import type { ConnectionOptions as TlsConnectionOptions } from 'node:tls';

/**
 * A SASL mechanism object, as produced by `credentials.plain()`,
 * `credentials.amqplain()` or `credentials.external()`, or built by hand.
 */
export interface SaslMechanism {
  /** SASL mechanism name sent to the broker, e.g. `'PLAIN'`. */
  mechanism: string;
  /** Produces the bytes sent in the `response` field of connection.start-ok. */
  response(): Buffer;
  username?: string;
  password?: string;
}

/** A mechanism built from a user name and password. */
export interface UserPasswordMechanism {
  mechanism: string;
  response(): Buffer;
  username: string;
  password: string;
}

/** A mechanism that carries no secret of its own (e.g. EXTERNAL / TLS client cert). */
export interface AnonymousMechanism {
  mechanism: string;
  response(): Buffer;
}

/** Replies (the `*-ok` methods) returned by the broker, in decoded form. */
export namespace Replies {
  /** Returned by operations whose `-ok` method carries no fields of interest. */
  interface Empty {}

  /** queue.declare-ok */
  interface AssertQueue {
    queue: string;
    messageCount: number;
    consumerCount: number;
  }

  /** queue.purge-ok */
  interface PurgeQueue {
    messageCount: number;
  }

  /** queue.delete-ok */
  interface DeleteQueue {
    messageCount: number;
  }

  /** exchange.declare-ok (the exchange name is filled in client-side). */
  interface AssertExchange {
    exchange: string;
  }

  /** basic.consume-ok */
  interface Consume {
    consumerTag: string;
  }

  /** basic.cancel-ok */
  interface Cancel {
    consumerTag: string;
  }
}

/** Option bags accepted by connect() and the channel operations. */
export namespace Options {
  /** Connection parameters given as an object instead of an `amqp://` URL. */
  interface Connect {
    /** `'amqp'` or `'amqps'`. */
    protocol?: string;
    hostname?: string;
    port?: number;
    username?: string;
    password?: string;
    locale?: string;
    /** Largest frame size to negotiate, in bytes. */
    frameMax?: number;
    /**
     * Largest frame payload accepted from the server, in bytes: a larger frame closes the
     * connection. Default 64 MiB, or the negotiated frameMax if larger; 0 for no limit.
     */
    maxFrameSize?: number;
    /** Heartbeat interval to negotiate, in seconds (0 disables). */
    heartbeat?: number;
    vhost?: string;
    /** Highest channel number to negotiate. */
    channelMax?: number;
    credentials?: SaslMechanism;
  }

  /** queue.declare flags plus RabbitMQ `x-` argument shortcuts. */
  interface AssertQueue {
    exclusive?: boolean;
    durable?: boolean;
    autoDelete?: boolean;
    /** Extra queue arguments, passed through as a field table. */
    arguments?: any;
    /** `x-message-ttl`, milliseconds. */
    messageTtl?: number;
    /** `x-expires`, milliseconds. */
    expires?: number;
    /** `x-dead-letter-exchange` */
    deadLetterExchange?: string;
    /** `x-dead-letter-routing-key` */
    deadLetterRoutingKey?: string;
    /** `x-max-length` */
    maxLength?: number;
    /** `x-max-priority` */
    maxPriority?: number;
    /** `x-overflow` */
    overflow?: string;
    /** `x-queue-mode` */
    queueMode?: string;
  }

  /** queue.delete flags. */
  interface DeleteQueue {
    ifUnused?: boolean;
    ifEmpty?: boolean;
  }

  /** exchange.declare flags plus the `alternate-exchange` shortcut. */
  interface AssertExchange {
    durable?: boolean;
    internal?: boolean;
    autoDelete?: boolean;
    alternateExchange?: string;
    arguments?: any;
  }

  /** exchange.delete flags. */
  interface DeleteExchange {
    ifUnused?: boolean;
  }

  /** basic.publish flags and message properties. */
  interface Publish {
    expiration?: string | number;
    userId?: string;
    CC?: string | string[];
    mandatory?: boolean;
    persistent?: boolean;
    deliveryMode?: boolean | number;
    BCC?: string | string[];
    contentType?: string;
    contentEncoding?: string;
    headers?: any;
    priority?: number;
    correlationId?: string;
    replyTo?: string;
    messageId?: string;
    timestamp?: number;
    type?: string;
    appId?: string;
  }

  /** basic.consume flags. */
  interface Consume {
    consumerTag?: string;
    noLocal?: boolean;
    noAck?: boolean;
    exclusive?: boolean;
    priority?: number;
    arguments?: any;
  }

  /** basic.get flags. */
  interface Get {
    noAck?: boolean;
  }
}

/** Socket-level options; anything `tls.connect()` accepts is allowed too. */
export interface SocketOptions extends TlsConnectionOptions {
  noDelay?: boolean;
  timeout?: number;
  keepAlive?: boolean;
  keepAliveDelay?: number;
  /** Extra entries merged into the client-properties table. */
  clientProperties?: Record<string, unknown>;
  credentials?: SaslMechanism;
}

/** Per-channel options. */
export interface ChannelOptions {
  /** Outgoing buffer size after which publish() starts returning false. */
  highWaterMark?: number;
}

/** Fields present on every delivered message. */
export interface CommonMessageFields {
  deliveryTag: number;
  redelivered: boolean;
  exchange: string;
  routingKey: string;
}

/** Fields of a message of unknown origin (consumed, fetched or returned). */
export interface MessageFields extends CommonMessageFields {
  messageCount?: number;
  consumerTag?: string;
}

/** Fields of a message fetched with basic.get. */
export interface GetMessageFields extends CommonMessageFields {
  messageCount: number;
}

/** Fields of a message pushed to a consumer. */
export interface ConsumeMessageFields extends CommonMessageFields {
  consumerTag: string;
}

/** One entry of the `x-death` header added by dead-lettering. */
export interface XDeath {
  count: number;
  reason: 'rejected' | 'expired' | 'maxlen';
  queue: string;
  time: {
    '!': 'timestamp';
    value: number;
  };
  exchange: string;
  'original-expiration'?: any;
  'routing-keys': string[];
}

/** Message headers, with the dead-letter headers spelled out. */
export interface MessagePropertyHeaders {
  [key: string]: any;
  'x-first-death-exchange'?: string;
  'x-first-death-queue'?: string;
  'x-first-death-reason'?: string;
  'x-death'?: XDeath[];
}

/** Basic content-header properties; absent ones are `undefined`. */
export interface MessageProperties {
  contentType: any;
  contentEncoding: any;
  headers: MessagePropertyHeaders | undefined;
  deliveryMode: any;
  priority: any;
  correlationId: any;
  replyTo: any;
  expiration: any;
  messageId: any;
  timestamp: any;
  type: any;
  userId: any;
  appId: any;
  clusterId: any;
}

/** A message body with its delivery fields and properties. */
export interface Message {
  content: Buffer;
  fields: MessageFields;
  properties: MessageProperties;
}

/** A message obtained with `get()`. */
export interface GetMessage extends Message {
  fields: GetMessageFields;
}

/** A message delivered to a `consume()` callback. */
export interface ConsumeMessage extends Message {
  fields: ConsumeMessageFields;
}

/** The server-properties table from connection.start. */
export interface ServerProperties {
  [key: string]: string | undefined;
  host: string;
  product: string;
  version: string;
  platform: string;
  copyright?: string;
  information: string;
}

/** Settings for automatic reconnection; `M` is the model handed to `setup`. */
export interface RecoveryOptionsFor<M> {
  /** Delay before the first reconnect attempt, ms (default 100). */
  initialDelay?: number;
  /** Upper bound on the delay between attempts, ms (default 30000). */
  maxDelay?: number;
  /** Multiplier applied to the delay after each failed attempt (default 2). */
  factor?: number;
  /** Random spread, 0 to 1, applied to each delay (default 0.2). */
  jitter?: number;
  /**
   * Give up after this many consecutive failed retries (default: never). Also bounds the
   * retries before the first connection unless `initialMaxRetries` is set.
   */
  maxRetries?: number;
  /**
   * Retries allowed before the first successful connection (default: `maxRetries`); once
   * connected, `maxRetries` applies. Lets startup fail fast while recovery keeps trying.
   */
  initialMaxRetries?: number;
  /**
   * Runs after every successful (re)connection, before the model reports
   * `connect`; either returns a promise or calls `done`.
   */
  setup?: ((model: M) => Promise<void>) | ((model: M, done: (err?: Error) => void) => void);
  /**
   * `false`: connect() hands over the recovering model at once, before the first attempt,
   * so listeners can be attached (and close() called) first; its `waitForConnect()` waits
   * for the first connection. Default true.
   */
  waitForConnect?: boolean;
  /**
   * Custom delay before each retry: called with the attempt number (from 1), returns
   * milliseconds; maxDelay does not apply to it. If it throws, or returns anything but a
   * finite number >= 0, recovery gives up (`reconnect-failed`, with that error).
   */
  calculateDelay?: (attempt: number) => number;
  /**
   * With a list of nodes: go round it in an order drawn at random once (default false), so
   * that a fleet of services does not pile onto the first node.
   */
  shuffle?: boolean;
  /** With a list of nodes: the index of the node tried first (default: the first). */
  preferredNode?: number;
  /**
   * amqplib-rs: asked before every connection attempt (the first one too) with the node about
   * to be tried; resolves to that attempt's credentials, `{ username, password }` (PLAIN) or
   * what `credentials.plain`/`amqplain`/`external` make: an OAuth2 token fetched afresh, say.
   * If it throws, resolves to anything else, or has not settled within the connect `timeout`,
   * that attempt fails (`connect-failed`). Without it, a reconnect authenticates as the node's
   * URL or socket options say, with the secret of the last `updateSecret` where there was one
   * (PLAIN and AMQPLAIN only).
   */
  credentials?: (node: ConnectedNode) => Promise<AttemptCredentials> | AttemptCredentials;
  /**
   * amqplib-rs: topology recovery. The model's createChannel and createConfirmChannel hand
   * out channels that outlive their connection: after each reconnect they come back with
   * their prefetch, confirm mode and consumers, and the exchanges, queues and bindings
   * declared through them are declared again (in the Java client's order). Their events:
   * 'lost' (err), 'recovered', 'consumer-cancelled' and 'consumer-recovered'
   * ({ consumerTag, queue }); `droppedAcks` counts acknowledgements of deliveries from a lost
   * connection, never sent to the new one. Default off: amqplib 2.3.1's recovery.
   */
  topology?: boolean | TopologyRecoveryOptions;
}

/** What the topology record holds (`filter`, `onError`). */
export type TopologyEntity =
  | { kind: 'exchange'; name: string; type: string; options: Options.AssertExchange }
  | { kind: 'queue'; name: string; options: Options.AssertQueue; serverNamed: boolean }
  | { kind: 'binding'; type: 'queue' | 'exchange'; destination: string; source: string; pattern: string; args?: any }
  | { kind: 'consumer'; queue: string; consumerTag: string; options?: Options.Consume }
  | { kind: 'prefetch'; count: number; global: boolean };

export interface TopologyRecoveryOptions {
  /** Returns false to leave an entity out of the record (it is then not recovered). */
  filter?: (entity: TopologyEntity) => boolean;
  /**
   * A replayed entity was refused (406 on other arguments, say): it is skipped and the replay
   * goes on. Without it, the model emits 'topology-error' (err, entity).
   */
  onError?: (err: Error, entity: TopologyEntity) => void;
  /** How long a channel's method called while disconnected waits for the recovery, ms (default 30000; 0: no limit). */
  waitTimeout?: number;
  /**
   * Confirm channels keep each publish until it settles: those unconfirmed when the connection
   * goes are sent again after the recovery (header `x-republished: true`), those made while
   * disconnected are held (beyond either bound `publish` returns false, and 'drain' follows) and
   * fail past `timeout` (default `waitTimeout`).
   */
  republish?: boolean | { maxMessages?: number; maxBytes?: number; timeout?: number };
}

/** What a recovering model's `credentials` hook answers. */
export type AttemptCredentials = { username: string; password: string | Buffer } | SaslMechanism;

/**
 * Where to connect: one broker's URL (a string or connection parameters), or a cluster's
 * nodes as a list of them, tried in turn (each with its own credentials, vhost and query
 * options where it gives them).
 */
export type ConnectTarget = string | Options.Connect | ReadonlyArray<string | Options.Connect>;

/** The second argument of a recovering model's `connect` event: which node it reached. */
export interface ConnectedNode {
  /** The node's index in the list given to `connect` (0 for a single URL). */
  index: number;
  /** Its protocol, host, port and vhost (never its credentials). */
  node: string;
}

/**
 * A connection's counters (`model.counters()`): totals since it opened, and how things
 * stand now. Reading them makes the object; counting costs nothing more.
 */
export interface ConnectionCounters {
  /** AMQP frames received and sent (a message is its method, header and body frames). */
  framesReceived: number;
  framesSent: number;
  /** Bytes read from and written to the socket. */
  bytesReceived: number;
  bytesSent: number;
  /** Socket reads and writes. */
  reads: number;
  writes: number;
  /** publish and sendToQueue calls sent. */
  messagesPublished: number;
  /** Messages handed to consumers, and got by `get`. */
  messagesDelivered: number;
  /** ack calls sent (consecutive ones may leave as one frame). */
  messagesAcked: number;
  /** Publishes on confirm channels the server has not acked or nacked yet. */
  confirmsOutstanding: number;
  /** Bytes waiting to be written. */
  writeBufferSize: number;
  /** When the last heartbeat frame arrived (ms since the epoch), or null. */
  lastHeartbeatAt: number | null;
}

/** Every connection's counters summed over the process (`counters()`). */
export interface ProcessCounters extends ConnectionCounters {
  /** Connections open now. */
  connections: number;
}

/** Shape of the `reconnect-scheduled` event payload. */
export interface ReconnectSchedule {
  attempt: number;
  delay: number;
  error: Error;
}

/** Factories for the SASL mechanisms understood by the client. */
export interface CredentialFactories {
  /** SASL PLAIN with the given user name and password. */
  plain(username: string, password: string): UserPasswordMechanism;
  /** RabbitMQ's AMQPLAIN with the given user name and password. */
  amqplain(username: string, password: string): UserPasswordMechanism;
  /** SASL EXTERNAL, e.g. authentication by TLS client certificate. */
  external(): AnonymousMechanism;
}
