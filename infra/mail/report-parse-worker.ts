// A report-parse-pool thread: parses one report per job (infra/mail/report-parse-pool.ts).
import { workerTask } from '../threads/worker-queue.ts';
import { parseReport, type ParsedReport } from './report-parser.ts';

export default workerTask<Uint8Array, ParsedReport>((bytes) => parseReport(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)));
