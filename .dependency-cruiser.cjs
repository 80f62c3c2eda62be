// Import boundaries between Relay's layers (see ARCHITECTURE.md), checked in CI by
// `npm run check:boundaries`. Type-only imports count like any other import.
// TypeScript is parsed with @swc/core (options.parser 'swc'): dependency-cruiser's own
// TypeScript route needs the compiler's JavaScript API, which TypeScript 7 does not ship.

// test/import-boundaries.int.test.ts writes short-lived probe files named
// `__relay_boundary_probe_<pid>_<case>.ts` into the layers; a full check that runs meanwhile
// leaves them out. The test sets RELAY_BOUNDARY_PROBES=1 in its checker's environment to see them.
const OUTSIDE = '^(data/|tmp/|[.][^./])';
const exclude = process.env.RELAY_BOUNDARY_PROBES === '1' ? OUTSIDE : `${OUTSIDE}|__relay_boundary_probe_`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      comment: 'domain/ holds pure rules: it imports only domain/ (no node: builtins, no packages, no other layer), and TypeBox for the event schemas.',
      severity: 'error',
      from: { path: '^domain/' },
      // node:url only for domainToASCII/domainToUnicode: IDNA is computation, not I/O. TypeBox
      // only declares schemas (the events' data, domain/*/events.ts) and checks values: no I/O.
      to: { pathNot: '^(domain/|url$|node_modules/@sinclair/typebox/)' },
    },
    {
      name: 'projections-import-only-domain',
      comment: 'projections/ are pure event -> read model functions: they import only domain/ (and each other).',
      severity: 'error',
      from: { path: '^projections/' },
      to: { pathNot: '^(domain|projections)/' },
    },
    {
      name: 'infra-not-upward',
      comment: 'infra/ holds adapters behind ports: it must not import apps/, projections/ or test/.',
      severity: 'error',
      from: { path: '^infra/' },
      to: { path: '^(apps|projections|test)/' },
    },
    {
      name: 'no-api-from-services-or-domain',
      comment: 'apps/services/ and domain/ must not import the HTTP layer (apps/api/).',
      severity: 'error',
      from: { path: '^(apps/services|domain)/' },
      to: { path: '^apps/api/' },
    },
    {
      name: 'schemas-not-services',
      comment: 'Request schemas (apps/api/**/*.schemas.ts) must not import apps/services/.',
      severity: 'error',
      from: { path: '^apps/api/.*[.]schemas[.]ts$' },
      to: { path: '^apps/services/' },
    },
    {
      name: 'dashboard-client-self-contained',
      comment: 'apps/dashboard/client/ runs in browsers: it imports only its own modules (the server sends nothing else).',
      severity: 'error',
      from: { path: '^apps/dashboard/client/' },
      to: { pathNot: '^apps/dashboard/client/' },
    },
    {
      name: 'test-only-from-test',
      comment: 'Nothing outside test/ imports test/.',
      severity: 'error',
      from: { pathNot: '^test/' },
      to: { path: '^test/' },
    },
    {
      name: 'no-unresolvable-relative',
      comment: 'A relative import the checker cannot resolve would slip past the rules above.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true, path: '^[.]' },
    },
  ],
  options: {
    parser: 'swc',
    // Cruise the whole tree (every layer, test/ included, and any new top-level folder), but
    // not run-time data or dot folders; packages are resolved (so domain/ -> 'some-package' is
    // seen) but not followed.
    exclude: { path: exclude },
    doNotFollow: { path: '(^|/)node_modules/' },
    moduleSystems: ['es6', 'cjs'],
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'types', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json', '.d.ts'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    cache: false,
    reporterOptions: {},
  },
};
