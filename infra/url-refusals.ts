// What a refusal of a URL variable (RELAY_SMTP_URL, RELAY_EVENTSTORE_URL, RELAY_MONGODB_URL) may
// say of it: never its user information, nor a part of the URL that could be some of it. A
// password cut short by an unescaped "?", "#" or "/" reads as host and port, the rest of it as
// query, fragment or path, with an "@" after the host.

/** What a refusal says when the user information seems cut short: the characters to escape. */
export const PERCENT_ENCODE_USERINFO = 'a user name or password holding "/", "?", "#" or "@" (or, for MongoDB, ":") must have them percent-encoded (%2F, %3F, %23, %40, %3A)';

/** Whether the parsed URL has an "@" after its host: user information cut short, nothing after the host to be quoted. */
export const userinfoCutShort = (url: URL): boolean => `${url.pathname}${url.search}${url.hash}`.includes('@');

/** Whether a query key or value may be quoted in a refusal: a short word, which a cut-short password rarely is. */
export const quotableUrlToken = (text: string): boolean => /^[a-z][a-z0-9_-]{0,31}$/i.test(text);
