// How the pages frame an email's HTML (a message's HTML part, a template's live preview).
// Nothing in it runs or reaches the dashboard: no allow-scripts, no allow-same-origin, no
// allow-forms, no top navigation. A link the reader clicks opens in a new tab instead (the
// frame itself may load nothing but this origin: frame-src 'self'), outside the sandbox so
// that the linked page works, with no referrer and no opener.

export const EMAIL_FRAME_SANDBOX = 'allow-popups allow-popups-to-escape-sandbox';

/**
 * A preview's HTML for srcdoc, its links opening in new tabs as the message route's do (its
 * own base element, apps/api/plugins/project-emails.ts). The base element may come before a
 * doctype here: a srcdoc document is never in quirks mode, whatever its doctype.
 */
export const previewSrcdoc = (html: string) => `<base target="_blank">${html}`;
