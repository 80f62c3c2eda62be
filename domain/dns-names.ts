/** A DNS name as names are compared: lower case, without the root's trailing dot. */
export function canonicalHost(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}
