// What the feedback tests stand on: a smarthost sink (its options the test's), Relay delivering to
// it with every processor running, the inbound feedback server that takes the reports, and a
// tenant whose sends go out there.
import type { InboundServer } from '../../apps/inbound/inbound-server.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, type DeliveryTenant } from './delivery.ts';
import { startTestInbound } from './inbound.ts';
import { startSmtpSink, type SmtpSink, type SmtpSinkOptions } from './smtp-sink.ts';

export interface FeedbackRig { sink: SmtpSink; t: TestApp; inbound: InboundServer; tenant: DeliveryTenant }

export async function startFeedbackRig(sinkOptions: SmtpSinkOptions = {}, env: Record<string, string> = {}): Promise<FeedbackRig> {
  const sink = await startSmtpSink(sinkOptions);
  const t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, ...env }, { processors: true });
  const inbound = await startTestInbound(t);
  return { sink, t, inbound, tenant: await deliveryTenant(t) };
}

export async function stopFeedbackRig(rig: Partial<FeedbackRig>): Promise<void> {
  await rig.inbound?.stop();
  await rig.t?.close();
  await rig.sink?.close();
}
