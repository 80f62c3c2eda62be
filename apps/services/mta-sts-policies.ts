// MTA-STS policies as fetched (infra/mail/mta-sts.ts), kept in the document store by domain so
// that a restarted sender (or another instance) still applies a domain's policy when its policy
// host cannot be reached, until the policy's max_age ends (RFC 8461 5.1). Expired ones are
// simply replaced by the next fetch; a domain's document is at most one policy.
import type { MtaStsPolicy, MtaStsPolicyStore } from '../../infra/mail/mta-sts.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { DuplicateKeyError } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';

type PolicyDoc = MtaStsPolicy & { _id: string };

export function mtaStsPolicyStore(documents: DocumentStore): MtaStsPolicyStore {
  const policies = documents.collection<PolicyDoc>(COLLECTIONS.mtaStsPolicies);
  return {
    async load(domain) {
      const found = await policies.get(domain);
      if (!found) return null;
      const { _id, _v, ...policy } = found;
      return policy;
    },
    async save(policy) {
      for (;;) {
        const current = await policies.get(policy.domain);
        try {
          if (!current) {
            await policies.insert({ _id: policy.domain, ...policy });
            return;
          }
          // A later fetch (another instance's) wins: never replace a policy with an older one.
          const fetchedAt = (p: MtaStsPolicy) => p.expiresAt - p.maxAge * 1000;
          if (fetchedAt(current) >= fetchedAt(policy)) return;
          if (await policies.replace({ _id: policy.domain, ...policy }, current._v)) return;
        } catch (error) {
          if (!(error instanceof DuplicateKeyError)) throw error;
        }
      }
    },
  };
}
