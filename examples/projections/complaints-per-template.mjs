// A custom read model for `relay projections run`: complaints per template revision, written to a
// JSON file (COMPLAINTS_OUT, default ./complaints-per-template.json) after every batch.
//
//   relay projections run examples/projections/complaints-per-template.mjs --follow
//
// Relay feeds apply() every event of the global order from this projection's checkpoint,
// upcast (the data as today's projections read it), and calls flush() after each batch, before
// it saves the checkpoint. A crash between the two hands the batch over again; the file keeps
// the position of what it holds, so a batch already counted is recognised and skipped.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

const out = process.env.COMPLAINTS_OUT ?? 'complaints-per-template.json';
let state = { position: null, complaints: {}, emails: {} };
let pending = [];

export function init() {
  try {
    state = JSON.parse(readFileSync(out, 'utf8'));
  } catch {
    // First run: nothing counted yet.
  }
}

export function apply(event) {
  pending.push(event);
}

export function flush({ position }) {
  // The batch this file already holds (a restart after flush, before Relay saved its checkpoint).
  if (pending.some((e) => e.position === state.position)) pending = pending.slice(pending.findIndex((e) => e.position === state.position) + 1);
  for (const event of pending) {
    if (event.type === 'EmailAccepted' && event.data.template) {
      const { slug, revision } = event.data.template;
      state.emails[event.data.emailId] = `${slug}@${revision}`;
    } else if (event.type === 'RecipientReported' && event.data.outcome === 'complained') {
      const emailId = event.streamId.slice('email-'.length);
      const template = state.emails[emailId] ?? '(no template)';
      state.complaints[template] = (state.complaints[template] ?? 0) + 1;
    }
  }
  pending = [];
  state.position = position;
  writeFileSync(`${out}.tmp`, JSON.stringify(state));
  renameSync(`${out}.tmp`, out);
}
