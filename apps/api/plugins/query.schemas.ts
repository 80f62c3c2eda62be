// The query of a route that takes no parameter. Every query schema of the API refuses members it
// does not name (additionalProperties: false), so that a typo such as `?limt=5` is a 400
// validation_error naming it (query.limt) instead of a silent default (INTERFACE-DECISIONS,
// Error codes). Pages, probes and /metrics keep ignoring parameters: browsers, scrapers and
// load balancers add their own (cache busters, UTM tags).
import { Type } from '@sinclair/typebox';

/** Any parameter is unknown: 400 validation_error naming it, as on routes whose query schema lists others. */
export const NoQuery = Type.Object({}, { additionalProperties: false });
