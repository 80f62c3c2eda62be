// What a process says when a worker-thread pool's threads fail to start (infra/threads/
// thread-starts.ts): the first failure of a streak at error, with the cause and what it means
// for the pool's jobs (each later one at debug: the back-off caps them at one per 30 s, and the
// counter shows them); the recovery at info. relay_worker_pool_start_failing is 1 meanwhile
// (ops/prometheus: RelayWorkerThreadsNotStarting).
import type { ThreadStartReport } from '../infra/threads/thread-starts.ts';
import type { RelayMetrics } from './relay-metrics.ts';

interface Logger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** What each pool's jobs become while no thread starts. */
const REFUSED: Record<string, string> = {
  compose: 'messages are not composed (their deliveries are retried)',
  template_rendering: 'sends with a template are refused (503)',
  template_compilation: 'template saves and previews are refused (503)',
  password_hashing: 'sign-ins, set-up and password changes are refused (503)',
  dkim_key_generation: 'domain creations and DKIM key rotation starts are refused (503)',
  report_parsing: 'bounce and complaint reports are answered 451 (their senders retry later)',
};

export function threadStartReport(pool: string, logger: Logger, metrics: RelayMetrics['workerThreads']): ThreadStartReport {
  return {
    failed(error, failures, retryInMs) {
      metrics.startFailures(pool).inc();
      metrics.startFailing(pool).set(1);
      const fields = { pool, err: error, failures, retryInMs };
      if (failures === 1) {
        logger.error(fields, `${pool} threads cannot start: ${error.message}; until one does, ${REFUSED[pool] ?? 'its jobs are refused'}; trying again in ${retryInMs} ms, then with a doubling wait`);
      } else {
        logger.debug(fields, `${pool} threads still cannot start; trying again in ${retryInMs} ms`);
      }
    },
    recovered(failures, failingMs) {
      metrics.startFailing(pool).set(0);
      logger.info({ pool, failures, failingSeconds: failingMs / 1000 }, `${pool} threads start again, after ${failures} failed starts`);
    },
  };
}
