// The send/read contract (test/conformance) on the embedded default: one API process on
// sqlite stores, forwarder and projector in-process.
import { runConformance } from './conformance/index.ts';
import { harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

runConformance('embedded', harnessRef(startEmbeddedHarness));
