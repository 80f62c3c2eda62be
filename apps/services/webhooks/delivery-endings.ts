// Ending the pending deliveries of endpoints disabled or deleted, and those of the event types
// taken out of an endpoint's events, in the background of the process that made the change: an
// endpoint that was down for a day can hold hundreds of thousands of them, too many to end inside
// the request that changed it (the request would take minutes, and a client retrying it on a
// timeout would start it again). The change is answered
// once the endpoint's own document is durable; its deliveries end shortly after, batch by batch
// (endPendingDeliveries), while the process goes on answering.
//
// Nothing here needs to survive a crash or a stop: what a run did not reach ends when it falls
// due, as attemptWebhookDelivery ends any delivery whose endpoint is gone or disabled, or that
// was made before the endpoint was last disabled (WebhookEndpoint.disableGeneration), or whose
// event type the endpoint no longer subscribes to, without a request.
import { setImmediate } from 'node:timers/promises';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { endPendingDeliveries, type DeliveryClosed, type Ending } from './deliveries.ts';

export interface DeliveryEndingsDeps {
  documents: DocumentStore;
  now: () => Date;
  /** Told how many deliveries a batch ended, and why (/metrics counts them as it counts those an attempt ends without a request). */
  onEnded?: (reason: DeliveryClosed, count: number) => void;
  /** Told when a run fails: the rest of its deliveries then end as each falls due. */
  onError: (error: Error, endpointId: string) => void;
}

/**
 * Both changes in one: the widest disable or deletion (the highest generation: concurrent
 * changes may be started out of order), and the types' cut if either asked for it.
 */
function widest(a: Ending, b: Ending): Ending {
  const closed = a.closed === undefined || (b.closed !== undefined && b.closed.below >= a.closed.below) ? b.closed : a.closed;
  return { closed, unsubscribed: a.unsubscribed === true || b.unsubscribed === true };
}

export class DeliveryEndings {
  readonly #deps: DeliveryEndingsDeps;
  /** One run per endpoint at a time: changes made again and again to one endpoint never run side by side. */
  readonly #running = new Map<string, Promise<void>>();
  /** The changes to an endpoint asked for while its run was going, as one (widest), run once that one ends. */
  readonly #next = new Map<string, Ending>();
  #stopped = false;

  constructor(deps: DeliveryEndingsDeps) {
    this.#deps = deps;
  }

  /**
   * Ends, in the background, the endpoint's pending deliveries that `ending` names: those whose
   * disable generation is below the endpoint's once disabled (Infinity once deleted), those of
   * types it no longer subscribes to once some were taken out of its events.
   */
  start(endpointId: string, ending: Ending): void {
    if (this.#stopped) return;
    if (this.#running.has(endpointId)) {
      const queued = this.#next.get(endpointId);
      this.#next.set(endpointId, queued === undefined ? ending : widest(queued, ending));
      return;
    }
    this.#running.set(endpointId, this.#run(endpointId, ending));
  }

  /** Resolves once no run is going. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }

  /** Starts no run from now on, and resolves once every run has left off after its batch in progress: none writes after this. */
  stop(): Promise<void> {
    this.#stopped = true;
    return this.idle();
  }

  async #run(endpointId: string, first: Ending): Promise<void> {
    try {
      // A turn of the event loop first: the request that asked for it is answered before any batch is read.
      await setImmediate();
      let ending: Ending | undefined = first;
      while (ending !== undefined && !this.#stopped) {
        try {
          await endPendingDeliveries(this.#deps.documents, endpointId, ending, {
            now: this.#deps.now,
            stopped: () => this.#stopped,
            onEnded: this.#deps.onEnded,
          });
        } catch (error) {
          this.#deps.onError(error as Error, endpointId);
        }
        ending = this.#next.get(endpointId);
        this.#next.delete(endpointId);
      }
    } finally {
      this.#next.delete(endpointId);
      this.#running.delete(endpointId);
    }
  }
}
