// Writing a command's output to stdout when the reader may go away (`relay events | head -1`):
// a write then fails with EPIPE, and the command stops rather than waiting or crashing.
import type { Writable } from 'node:stream';

/** The reader of the output went away (EPIPE, or the stream closed under a write). */
export function isOutputClosed(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

function closedError(): Error {
  return Object.assign(new Error('the output was closed'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/**
 * Writes one line at a time, waiting for the stream to drain. Rejects when the stream fails
 * ('error', e.g. EPIPE) or closes before it drains, so a loop of writes ends (and its
 * `finally` closes the stores) instead of waiting for a 'drain' that never comes.
 */
export function lineWriter(out: Writable): (line: string) => Promise<void> {
  return (line) => new Promise<void>((resolve, reject) => {
    if (out.destroyed || out.writableEnded) {
      reject(out.errored ?? closedError());
      return;
    }
    const settle = (error?: Error) => {
      out.off('drain', onDrain);
      out.off('error', onError);
      out.off('close', onClose);
      if (error) reject(error);
      else resolve();
    };
    const onDrain = () => settle();
    const onError = (error: Error) => settle(error);
    const onClose = () => settle(out.errored ?? closedError());
    out.on('error', onError);
    out.on('close', onClose);
    if (out.write(`${line}\n`)) settle();
    else out.on('drain', onDrain);
  });
}
