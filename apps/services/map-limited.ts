// Work over a list with a bound on how much of it runs at once (transactions of one email,
// DNS re-checks of a page of domains).

/**
 * `work` on every item, at most `limit` at once, results in the items' order. The first failure
 * stops new work from starting and is thrown once the work under way has ended, so nothing is
 * left running behind a rejection.
 */
export async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  let failure: { error: unknown } | null = null;
  const worker = async () => {
    while (failure === null && next < items.length) {
      const i = next++;
      try {
        results[i] = await work(items[i]);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== null) throw (failure as { error: unknown }).error;
  return results;
}
