// Enforces body retention (seven days): destroys expired content keys at start and then
// periodically. Safe to run in several processes at once: each deletion is one document.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { shredExpiredContent } from '../services/content-vault.ts';

export interface RetentionOptions {
  documents: DocumentStore;
  now: () => Date;
  everyMs?: number;
  onShredded?: (count: number) => void;
  onError?: (error: Error) => void;
}

export async function startRetention(options: RetentionOptions): Promise<{ stop(): Promise<void> }> {
  let running: Promise<void> = Promise.resolve();
  const sweep = () => {
    running = shredExpiredContent(options.documents, options.now()).then(
      (count) => options.onShredded?.(count),
      (error) => options.onError?.(error as Error),
    );
    return running;
  };
  await sweep();
  const timer = setInterval(() => void running.then(sweep), options.everyMs ?? 10 * 60_000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
