// A report-parse-pool thread (piscina): parses one report per task. It tells the pool when it
// starts one, so that the report's time budget counts from then.
import { parentPort } from 'node:worker_threads';
import { parseReport, type ParsedReport } from './report-parser.ts';

export interface ParseTask {
  id: number;
  bytes: Uint8Array;
}

export default async function parse({ id, bytes }: ParseTask): Promise<ParsedReport> {
  parentPort?.postMessage({ started: id });
  return parseReport(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}
