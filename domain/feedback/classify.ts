// What an inbound report says happened to one recipient. Relay's return paths (domain/delivery/
// verp.ts) bring back delivery status notifications, non-standard bounce texts and complaint
// (ARF) reports; infra/mail/report-parser.ts reads the MIME and calls these pure rules.
//
// Outcomes
//   hard_bounced   the address itself is bad: it does not exist, its domain does not, it moved,
//                  or its domain accepts no mail. Mail to it will keep failing.
//   soft_bounced   this message was refused or given up on for a reason that is not the address:
//                  a full mailbox, a message too large, a spam/policy/reputation refusal, a
//                  network or system failure, an expired queue lifetime, a temporary (4.x.x)
//                  error that the reporting MTA stopped retrying.
//   delayed        the reporting MTA is still retrying (Action: delayed, warning texts).
//   delivered      Action: delivered / relayed / expanded, or a 2.x.x status (NOTIFY=SUCCESS).
//   complained     the recipient reported the message (ARF abuse, fraud, virus, other).
//   undetermined   a failure whose cause the report states in no form these rules read.
//
// "Hard" is Sisimai's notion (is_hardbounce in github.com/sisimai): only the reasons that
// condemn the address (userunknown, hostunknown, hasmoved, notaccept with a 5xx) are hard. A
// 5.x.x refusal for spam, policy, reputation, content, size or a full mailbox says nothing about
// the address: another message, another day or another sending IP may pass, so it is soft, and
// a later step must not suppress a real address for it. RFC 3463's status subjects draw the same
// line: X.1.x (addressing) condemns the address, X.2.x says the mailbox exists, X.3 to X.7 are
// the system, network, protocol, content and policy.
//
// DSN recipients (RFC 3464), classifyDsnRecipient:
//   Action delivered | relayed | expanded, or a 2.x.x status    -> delivered
//   Action delayed                                              -> delayed (delay_type from the
//                                                                  diagnostic's rule)
//   Action failed + Status 4.x.x                                -> soft_bounced
//   Action failed (or missing) + Status 5.x.x                   -> classifyText(Diagnostic-Code,
//                                                                  the status, the notice)
//   Action failed + missing/odd Status                          -> classifyText(Diagnostic-Code,
//                                                                  the notice): codes found in
//                                                                  the text, else undetermined
// The notice is what the report's human-readable part says about the recipient; it is read
// only where the Diagnostic-Code names no cause (many MTAs put the real reply only there).
//
// classifyText, first match wins:
//   1 an explicit sender status (X.1.7, X.1.8): the refused address is our return path;
//   2 PHRASE_RULES over the text, then over the notice: well-known wordings of qmail, Exim,
//     Postfix, Sendmail, Exchange/Office 365, Gmail, Yahoo, Domino, OpenSMTPD, Courier, ...;
//   3 STATUS_RULES over the status (the given one; for X.0.0, the text's own code of the same
//     class), or the first 4.x.x/5.x.x code in the text;
//   4 REPLY_RULES over the first 4xx/5xx reply code (before 3 when the status is X.0.x, which
//     says nothing more than "permanent");
//   5 FALLBACK_RULES: "temporary"/"transient" -> soft, "permanent" -> hard;
//   else undetermined. Then a hard result is softened:
//   - next to a class 4 code: a temporary condition never condemns the address (Postfix's
//     soft_bounce "450 4.1.1 User unknown" included);
//   - when the refusal came before RCPT TO (REFUSED_BEFORE_RCPT): it refused the host or the
//     return path, not the recipient;
//   - when it came after DATA (REFUSED_AFTER_DATA) and no X.1.x status or vendor statement says
//     otherwise: the recipient was accepted, a filter refused the message (Sisimai: filtered).
//
// Ambiguous classes, decided here (soft unless said):
//   mailbox full / over quota (X.2.2, 452, 552)   the mailbox exists and may be emptied
//   message too large (X.2.3, X.3.4)              about the message
//   mailbox disabled / suspended / inactive       RFC 3463 X.2.1 "may be ... transient";
//                                                 Sisimai's "suspend" is soft
//   spam, blocked, blacklisted, reputation, policy, SPF/DKIM/DMARC, virus, relaying denied,
//   no PTR, rate limits, greylisting              a refusal of this sender or message: the
//                                                 corpus (Sisimai blocked, spamdetected,
//                                                 policyviolation, securityerror, rejected...)
//                                                 never calls them hard
//   sender refused (X.1.7, X.1.8)                 about our return path, not the recipient
//   expired in the queue (X.4.7), network errors  the destination was never reached
//   unable to route (X.4.4), host/domain unknown  HARD: the destination domain does not resolve
//   5.0.0 or a bare 550/551/553 with no phrase    HARD: a permanent failure at the mailbox
//   554 / 50x with no phrase                      554 is "transaction failed" (in practice a
//                                                 policy refusal), 50x a protocol error
//
// Against Sisimai's hard/soft flags on 353 real bounces (test/bounce-corpus.int.test.ts) these
// rules agree on 95.8 %; the test prints the disagreements.
//
// Value sets carried by later events: BOUNCE_TYPES, COMPLAINT_TYPES, DELAY_TYPES below.

export const REPORT_OUTCOMES = ['hard_bounced', 'soft_bounced', 'delayed', 'delivered', 'complained', 'undetermined'] as const;
export type ReportOutcome = (typeof REPORT_OUTCOMES)[number];

/** bounce_type of a failed recipient: hard_bounced -> hard, soft_bounced -> soft, undetermined. */
export const BOUNCE_TYPES = ['hard', 'soft', 'undetermined'] as const;
export type BounceType = (typeof BOUNCE_TYPES)[number];

/**
 * complaint_type: the Feedback-Type of an ARF report (RFC 5965, IANA "Feedback Report Type
 * Values": abuse, fraud, virus, other, not-spam, auth-failure). Unregistered values (opt-out,
 * the drafts' unsubscribe, ...) are 'other'.
 */
export const COMPLAINT_TYPES = ['abuse', 'fraud', 'virus', 'other', 'not-spam', 'auth-failure'] as const;
export type ComplaintType = (typeof COMPLAINT_TYPES)[number];

/**
 * delay_type of a delayed recipient, from the rule that classified its diagnostic:
 * mailbox_full, policy (blocked, spam, greylisted, rate limited), network (connection, DNS,
 * routing), recipient_server (the remote system's own trouble), general (a bare 4.x.x), or
 * undetermined (no diagnostic at all).
 */
export const DELAY_TYPES = ['mailbox_full', 'policy', 'network', 'recipient_server', 'general', 'undetermined'] as const;
export type DelayType = (typeof DELAY_TYPES)[number];

export interface BounceRule {
  name: string;
  pattern: RegExp;
  outcome: 'hard_bounced' | 'soft_bounced' | 'delayed';
  /** What a delay with this cause is called; rules without one count as 'general'. */
  delay?: DelayType;
}

/**
 * Well-known wordings, in order: the first match wins. Matched against the text lower-cased,
 * addresses masked, whitespace runs collapsed to one space. Order matters where wordings
 * overlap: a delay notice before anything it quotes; a refused *sender* ("Sender address
 * rejected: Domain not found") and a local delivery agent's failure before the recipient's
 * address and domain rules; a full mailbox before "unknown address" (Amazon SES wraps every
 * reply in "Unknown address error"); the address rules before the broad policy words
 * ("blocked", "policy") that boilerplate around them often contains.
 */
export const PHRASE_RULES: readonly BounceRule[] = [
  {
    name: 'delay_notice',
    outcome: 'delayed',
    pattern: /\b(?:(?:delivery|message) (?:to [^.]{1,120} )?(?:has been|is|was|is being) delayed|delivery (?:is )?delayed|(?:has|have) not yet been delivered|will (?:continue to|keep (?:on )?)(?:try|retry|attempt)|(?:will be|still being) retried|delivery attempts will continue|this is a warning (?:message )?only|could not be delivered for (?:more than )?\d+ (?:hour|day|minute))/,
  },
  {
    name: 'sender_rejected',
    outcome: 'soft_bounced',
    delay: 'policy',
    pattern: /\b(?:sender (?:address )?(?:rejected|refused|denied|blocked|not allowed|unknown|domain (?:not found|does not exist|must exist|is empty))|sender verify failed|sender verification (?:failed|is required)|unverified sender|(?:domain of )?sender address [^ ]{1,100} (?:does not|doesn't) (?:resolve|exist)|mail from [^ ]{0,100} ?(?:rejected|refused|not accepted)|please use the smtp server of your isp|(?:invalid|bad|unknown|unroutable|unrouteable) sender(?: address| domain)?|unauthenti(?:c|fic)ated sender)/,
  },
  {
    // A local delivery agent failing is the receiving system's trouble, whatever it prints.
    name: 'mailer_error',
    outcome: 'soft_bounced',
    delay: 'recipient_server',
    pattern: /(?:\b(?:command|program|mailer|pipe) (?:died|failed|error)|\bunknown mailer error|\bprocmail\b|\bcommand output:|\bexit (?:status|code) \d+|\blocal delivery failed|\bpipe to \||\bno such file or directory)/,
  },
  {
    name: 'mailbox_full',
    outcome: 'soft_bounced',
    delay: 'mailbox_full',
    pattern: /\b(?:mail ?box (?:is |was )?(?:full|over ?quota|overflow)|(?:mail ?box|mail ?folder|inbox|storage|disk) (?:is )?full|full (?:mail ?box|inbox)|(?:over|exceed(?:ed|s|ing)?|reached)(?: the| his| her| their| its| your| user'?s| mailbox| disk| storage){0,3} (?:storage |disk |mailbox |size )?quota|quota (?:exceeded|exceed|full|violation|limit)|over ?quota|exceeded storage allocation|(?:mail ?box|mailbox size|storage) (?:limit )?(?:exceeded|has exceeded|size limit)|insufficient (?:disk |storage )?space|not enough (?:disk |storage )?space|out of (?:disk |storage )?space|mailbox (?:has )?exceeded)/,
  },
  {
    name: 'vendor_account_missing',
    // Yahoo/AOL and Orange/La Poste refuse an unknown account only after DATA, in words of their
    // own: a statement about the account, not a filter's (see REFUSED_AFTER_DATA).
    outcome: 'hard_bounced',
    pattern: /\b(?:this user doesn't have an? (?:yahoo|ymail|aol|rocketmail|verizon)[^ ]{0,40} account|(?:ofr|lpn)\d{0,4}_416\b)/,
  },
  {
    name: 'kddi_recipient_filter',
    // au/KDDI (ezweb.ne.jp, au.com) answers "550 : User unknown", with no address, when the
    // recipient's own reception filter refuses the sender; an unknown user gets "550 <a>: User
    // unknown" (Sisimai's rhost KDDI rule).
    outcome: 'soft_bounced',
    delay: 'policy',
    pattern: /\b550:? : user unknown/,
  },
  {
    name: 'recipient_access_denied',
    // Postfix's recipient access maps and Office 365's Directory Based Edge Blocking answer
    // this for an address the server will not receive mail for; Sisimai reads it as userunknown.
    outcome: 'hard_bounced',
    pattern: /\brecipient address rejected: access denied/,
  },
  {
    name: 'address_unknown',
    outcome: 'hard_bounced',
    pattern: /\b(?:(?:user|recipient|mailbox|address|addressee|account|e-?mail account|local user|alias|destination address)(?:'s)?(?: name)? (?:is )?(?:unknown|not found|not exist|(?:does|did) not exist|doesn't exist|not recogni[sz]ed|not valid|invalid|not local|not listed|unavailable)|unknown (?:or illegal )?(?:user|recipient|mailbox|address|addressee|local[- ]part|alias|account)|no such (?:user|recipient|mailbox|address|account|person|local user|e-?mail)|no mailbox here by that name|(?:invalid|bad|illegal|non-?existent|nonexisting|unrouteable) (?:recipient|mailbox|destination|address|user|account|e-?mail address)|(?:user|recipient|mailbox|address|account)s? (?:that|which|you)[^.]{0,60} (?:does not|doesn't|did not) exist|e-?mail address (?:was|wasn['’]t|was not) (?:not )?found|(?:doesn't|does not) have an? [^ ]{1,60} account|not listed in (?:the )?(?:domino directory|public name (?:&|and) address book)|not our customer|resolver\.adr\.(?:recipnotfound|recipientnotfound|exrecipnotfound)|recipient not found|address not found|mailbox not found|mailbox unavailable|user doesn't exist|no valid recipients?|is not a valid (?:mailbox|user|recipient|address)|(?:mailbox|account|address) (?:has been |is )?(?:removed|deleted|closed|terminated|discontinued)|(?:account|mailbox) (?:no longer exists|is no longer)|unknown recipient|recipient unknown|user unknown|unknown user)/,
  },
  {
    name: 'dns_temporary',
    // Postfix's "Host not found, try again" is a DNS lookup that failed for now (SERVFAIL).
    outcome: 'soft_bounced',
    delay: 'network',
    pattern: /\b(?:(?:host|domain) not found, try again|temporary (?:dns|lookup|name ?server) (?:failure|error)|dns (?:lookup )?(?:timeout|timed out|servfail)|servfail)/,
  },
  {
    name: 'domain_unknown',
    outcome: 'hard_bounced',
    pattern: /\b(?:host (?:or domain name )?not found|host unknown|unknown (?:host|domain)|(?:domain|host)(?: name)? (?:not found|does not exist|doesn't exist|unknown|is not valid|invalid)|no such (?:domain|host)|unrouteable (?:mail )?domain|name (?:or|and) service not known|nxdomain|domain name not found|(?:couldn't|could not|cannot|can't) find any host (?:named|by that name)|all relevant mx records point to non-existent hosts|no (?:valid )?mx (?:record|host)s?(?: found)?|(?:no|bad) (?:dns|mx) (?:record|entry)|unresolvable (?:host|domain)|domain (?:is )?not reachable|resolver\.adr\.(?:recipientdomain|domain))/,
  },
  {
    name: 'address_moved',
    outcome: 'hard_bounced',
    pattern: /\b(?:(?:user|address|recipient|mailbox) (?:has )?moved|has moved|no longer (?:with|at|in use|valid|employed|works|available|active)|not local; please try)/,
  },
  {
    name: 'domain_accepts_no_mail',
    outcome: 'hard_bounced',
    pattern: /\b(?:(?:does not|doesn't|do not) accept (?:any )?(?:e-?)?mail|null mx|accepts no mail)/,
  },
  {
    name: 'message_too_large',
    outcome: 'soft_bounced',
    pattern: /\b(?:message (?:size |length )?(?:is )?too (?:large|big|long)|message (?:size |length )?exceeds|(?:size|length) (?:limit )?exceeded|exceeds (?:the )?(?:maximum|size limit|max(?:imum)? (?:message )?size|message size)|message (?:is )?larger than|too big for (?:the )?system)/,
  },
  {
    name: 'mailbox_disabled',
    outcome: 'soft_bounced',
    delay: 'recipient_server',
    pattern: /\b(?:(?:account|mail ?box|user|address|recipient)(?: that you tried to reach)? (?:has been |is |was )?(?:temporarily )?(?:disabled|suspended|inactive|deactivated|de-activated|locked|frozen|expired|on hold|blocked due to inactivity)|(?:disabled|inactive|suspended|deactivated|frozen|expired) (?:account|mail ?box|user))/,
  },
  {
    name: 'relaying_denied',
    outcome: 'soft_bounced',
    delay: 'policy',
    pattern: /\b(?:relay(?:ing)? (?:access )?(?:denied|not permitted|prohibited|not allowed|refused)|(?:not permitted|not allowed|unable|we do not) (?:to )?relay|relay not permitted|not an open relay|no relaying)/,
  },
  {
    name: 'policy_rejected',
    outcome: 'soft_bounced',
    delay: 'policy',
    pattern: /\b(?:spam|junk mail|bulk mail|unsolicited|block(?:ed|ing|list(?:ed)?)?|black ?list(?:ed)?|deny ?list(?:ed)?|rbl|dnsbl|spamhaus|spamcop|sorbs|reputation|polic(?:y|ies)|content (?:filter|rejected|not accepted)|filtered|rejected (?:due to|because of|for) (?:content|policy|security)|virus|malware|infected|phish|dmarc|spf|dkim|authentication (?:failed|required|failure)|not authenticated|unauthenticated|suspicious|reverse (?:dns|lookup|hostname)|rdns|ptr record|no ptr|client host [^ ]{1,200} rejected|access denied|not allowed to send|prohibited|greylist(?:ed|ing)?|graylist(?:ed|ing)?|security (?:reasons|policy))/,
  },
  {
    name: 'rate_limited',
    outcome: 'soft_bounced',
    delay: 'policy',
    pattern: /\b(?:too many (?:connections|messages|recipients|concurrent|sessions|emails|mails)|rate limit(?:ed|ing)?|rate that prevents additional|throttl(?:ed|ing)|exceeded (?:the )?(?:rate|sending) limit|sending rate|receiving mail at a rate|try again later, closing connection)/,
  },
  {
    name: 'expired',
    outcome: 'soft_bounced',
    delay: 'network',
    pattern: /\b(?:(?:retry|delivery) (?:time(?:out)?|period|lifetime) (?:exceeded|expired|reached|has expired)|retry timeout exceeded|message expired|(?:been|was|sat) (?:in|on) the queue too long|too long in (?:the )?queue|delivery time expired|message timed out|could not be delivered (?:within|in) (?:the )?(?:last )?\d+|cannot send message for \d+|could not deliver (?:the message )?in the time limit|expired after \d+|envelope expired|after (?:multiple|repeated|several|too many) (?:retries|attempts)|(?:have|has) been failing for a long time|retry time not reached)/,
  },
  {
    name: 'mail_loop',
    outcome: 'soft_bounced',
    delay: 'recipient_server',
    pattern: /\b(?:loops back to myself|mail (?:for [^ ]{1,200} )?loops back|routing loop|mail loop|too many hops|hop count exceeded|mail forwarding loop)/,
  },
  {
    name: 'network_error',
    outcome: 'soft_bounced',
    delay: 'network',
    pattern: /\b(?:connection (?:timed out|refused|reset|lost|closed|dropped)|timed out|network (?:is )?unreachable|no route to host|(?:could not|couldn't|unable to|cannot|can't) (?:connect|establish)|lost connection|tls (?:negotiation|handshake) failed|dns (?:error|failure|lookup failed|temporary)|host name lookup failure|temporary (?:dns|lookup) failure|no answer from host|(?:did not|didn't) accept our requests? to connect|socket error)/,
  },
  {
    name: 'protocol_error',
    outcome: 'soft_bounced',
    delay: 'recipient_server',
    pattern: /\b(?:syntax error|command (?:unrecognized|not recognized|not implemented)|bad sequence of commands|improper use of|line too long|invalid (?:command|data)|protocol (?:error|violation)|not (?:rfc|rfc-?5322|rfc-?2822) compliant|header (?:is )?(?:missing|invalid|malformed))/,
  },
  {
    name: 'recipient_server_error',
    outcome: 'soft_bounced',
    delay: 'recipient_server',
    pattern: /\b(?:(?:system|server|service|mail ?system|host) (?:error|failure|unavailable|not available|busy|is busy|temporarily unavailable|overloaded|shutting down)|internal (?:server )?error|local error in processing|insufficient system (?:storage|resources)|resources? temporarily unavailable|try (?:again )?later|temporar(?:y|ily) (?:failure|error|unavailable|rejected|deferred|problem))/,
  },
];

/**
 * Enhanced status codes (RFC 3463) written "c.s.d", first match wins. The subject decides:
 * X.1.x is the address (hard, but for X.1.7/X.1.8, the sender's), X.4.4 an unroutable
 * destination (hard), X.2.x a mailbox that exists, X.3 to X.7 the system, network, protocol,
 * content and policy (soft); 5.0.x and other 5.x.x are hard; 4.x.x are soft.
 */
export const STATUS_RULES: readonly BounceRule[] = [
  { name: 'status_sender_address', pattern: /^[45]\.1\.[78]$/, outcome: 'soft_bounced', delay: 'policy' },
  { name: 'status_mailbox_full', pattern: /^4\.2\.2$/, outcome: 'soft_bounced', delay: 'mailbox_full' },
  { name: 'status_network', pattern: /^4\.4\.\d{1,3}$/, outcome: 'soft_bounced', delay: 'network' },
  { name: 'status_policy_transient', pattern: /^4\.7\.\d{1,3}$/, outcome: 'soft_bounced', delay: 'policy' },
  { name: 'status_recipient_server_transient', pattern: /^4\.[35]\.\d{1,3}$/, outcome: 'soft_bounced', delay: 'recipient_server' },
  { name: 'status_transient', pattern: /^4\.\d{1,3}\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_address_moved', pattern: /^5\.1\.6$/, outcome: 'hard_bounced' },
  { name: 'status_domain_accepts_no_mail', pattern: /^5\.1\.10$/, outcome: 'hard_bounced' },
  { name: 'status_bad_destination', pattern: /^5\.1\.\d{1,3}$/, outcome: 'hard_bounced' },
  { name: 'status_unroutable', pattern: /^5\.4\.4$/, outcome: 'hard_bounced' },
  { name: 'status_mailbox_full', pattern: /^5\.2\.2$/, outcome: 'soft_bounced' },
  { name: 'status_mailbox', pattern: /^5\.2\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_mail_system', pattern: /^5\.3\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_network', pattern: /^5\.4\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_protocol', pattern: /^5\.5\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_content', pattern: /^5\.6\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_policy', pattern: /^5\.7\.\d{1,3}$/, outcome: 'soft_bounced' },
  { name: 'status_permanent', pattern: /^5\.\d{1,3}\.\d{1,3}$/, outcome: 'hard_bounced' },
];

/**
 * SMTP reply codes (RFC 5321), when no enhanced code says more. Only the replies about the
 * mailbox or the domain condemn the address: 550 mailbox unavailable, 551 user not local,
 * 553 mailbox name not allowed, 521/556 domain accepts no mail (RFC 7504). 552 (storage), 554
 * (transaction failed: in practice a policy refusal) and 500-504 (protocol) are soft.
 */
export const REPLY_RULES: readonly BounceRule[] = [
  { name: 'reply_storage_exceeded', pattern: /^452$/, outcome: 'soft_bounced', delay: 'mailbox_full' },
  { name: 'reply_transient', pattern: /^4\d\d$/, outcome: 'soft_bounced' },
  { name: 'reply_domain_accepts_no_mail', pattern: /^(?:521|556)$/, outcome: 'hard_bounced' },
  { name: 'reply_mailbox_unavailable', pattern: /^(?:550|551|553)$/, outcome: 'hard_bounced' },
  { name: 'reply_storage_exceeded', pattern: /^552$/, outcome: 'soft_bounced' },
  { name: 'reply_transaction_failed', pattern: /^554$/, outcome: 'soft_bounced' },
  { name: 'reply_protocol', pattern: /^50\d$/, outcome: 'soft_bounced' },
  { name: 'reply_permanent', pattern: /^5\d\d$/, outcome: 'hard_bounced' },
];

/** The last resort for a text that names no code and no known cause. */
export const FALLBACK_RULES: readonly BounceRule[] = [
  { name: 'text_temporary', pattern: /\b(?:temporar(?:y|ily)|transient|deferred)\b/, outcome: 'soft_bounced' },
  { name: 'text_permanent', pattern: /\bpermanent(?:ly)?\b/, outcome: 'hard_bounced' },
];

/** Every rule, in the order classifyText tries them. */
export const BOUNCE_RULES: readonly BounceRule[] = [...PHRASE_RULES, ...STATUS_RULES, ...REPLY_RULES, ...FALLBACK_RULES];

export interface Classification {
  outcome: ReportOutcome;
  /** The rule that decided, or null when nothing did (delivered, undetermined, ...). */
  rule: string | null;
  /** The enhanced status code used, if any ("5.1.1"). */
  status: string | null;
  /** The SMTP reply code found, if any ("550"). */
  replyCode: string | null;
  /** For a delayed outcome, what kind of delay. */
  delayType: DelayType | null;
}

export interface DsnRecipientFields {
  action: string | null;
  status: string | null;
  diagnosticCode: string | null;
  /** What the report's human-readable part says about this recipient, if it says anything. */
  notice?: string | null;
}

/** Rules read at most this much text: a cause is stated near the address, not 100 KB later. */
export const MAX_CLASSIFIED_TEXT = 32 * 1024;

// Failure codes only (a transcript's "250 2.1.5 Ok" is no cause). A status is "c.s.d", alone or
// after a multiline reply's "550-"; not inside an IP address or a version number (192.5.1.1, 8.14.3/8.14.3).
const ENHANCED_CODE = /(?<![\w.\/])(?<!(?:^|\D)-)([45])\.(\d{1,3})\.(\d{1,3})(?![\w\/-]|\.\d)/;
// A reply code starts a reply: at the start, after a colon, semicolon, bracket or "said".
const REPLY_CODE = /(?:^|[:;(\[>]|\bsaid|\breturned|\berror|\breply|\bresponse|\bcode) ?([45]\d\d)(?=[ -]|$)/;

// An address says nothing about the failure, and its words must not be read as one
// ("filtered@example.jp", "spam-trap@...", "nosuchuser@...").
const ADDRESS_LIKE = /[^\s<>"'(),;:[\]]{1,256}@[a-z0-9][a-z0-9.-]{0,253}/g;

/** Lower-cased, addresses masked, whitespace collapsed, bounded: what every rule reads. */
export function normalizeText(text: string): string {
  const bounded = text.length > MAX_CLASSIFIED_TEXT ? text.slice(0, MAX_CLASSIFIED_TEXT) : text;
  return bounded.toLowerCase().replace(ADDRESS_LIKE, 'address').replace(/\s+/g, ' ').trim();
}

/** The first failure (4.x.x, 5.x.x) enhanced status code in a text, as "c.s.d" (leading zeros dropped). */
export function findEnhancedCode(text: string): string | null {
  const match = ENHANCED_CODE.exec(text.length > MAX_CLASSIFIED_TEXT ? text.slice(0, MAX_CLASSIFIED_TEXT) : text);
  return match ? `${match[1]}.${Number(match[2])}.${Number(match[3])}` : null;
}

/** The first failure (4xx, 5xx) SMTP reply code in a text that stands where a reply starts. */
export function findReplyCode(text: string): string | null {
  const match = REPLY_CODE.exec(text.length > MAX_CLASSIFIED_TEXT ? text.slice(0, MAX_CLASSIFIED_TEXT) : text);
  return match ? match[1] : null;
}

/** A DSN Status value as "c.s.d", or null when it is not one (RFC 3464: "5.1.1 (comment)"). */
export function normalizeStatus(status: string | null | undefined): string | null {
  if (!status) return null;
  const match = /^\s*([245])\.(\d{1,3})\.(\d{1,3})(?!\d)/.exec(status.slice(0, 200));
  return match ? `${match[1]}.${Number(match[2])}.${Number(match[3])}` : null;
}

function firstMatch(rules: readonly BounceRule[], subject: string): BounceRule | null {
  for (const rule of rules) if (rule.pattern.test(subject)) return rule;
  return null;
}

function delayTypeOf(rule: BounceRule | null, hasDiagnostic: boolean): DelayType {
  if (rule?.delay) return rule.delay;
  return hasDiagnostic || rule ? 'general' : 'undetermined';
}

function verdict(outcome: ReportOutcome, rule: BounceRule | null, status: string | null, replyCode: string | null, hasText: boolean): Classification {
  return { outcome, rule: rule?.name ?? null, status, replyCode, delayType: outcome === 'delayed' ? delayTypeOf(rule, hasText) : null };
}

/**
 * A refusal that came only after DATA: the receiver had accepted the recipient at RCPT TO, so
 * the mailbox exists and what refused the message was a filter (Postfix "in reply to end of
 * DATA command", Exim "after end of data", a Sendmail transcript ">>> DATA" then "<<< 5xx").
 * Sisimai calls these "filtered", and they are never hard.
 */
export const REFUSED_AFTER_DATA = /\bin reply to end of data command|\bafter (?:end of )?data\b|>>> ?data <<< ?5\d\d/;

/**
 * A refusal before RCPT TO (at the greeting, EHLO/HELO, MAIL FROM or STARTTLS) cannot be about
 * the recipient: it refused the sending host or the return path (Sisimai: blocked, rejected).
 */
export const REFUSED_BEFORE_RCPT = /\bafter (?:initial connection|connection|ehlo|helo|mail from|starttls)\b|\bin reply to (?:mail from|ehlo|helo|starttls|the initial greeting|initial greeting) command|>>> ?(?:mail from|ehlo|helo)\b(?:(?!>>>|<<<).){0,300}<<< ?5\d\d/;

export interface TextInput {
  /** An enhanced status code given apart from the text (a DSN's Status field). */
  status?: string | null;
  /**
   * A second description of the same failure, read when the text names no cause: what the
   * report's human-readable part says about this recipient.
   */
  notice?: string | null;
}

/**
 * Classifies a failure described by free text (a bounce body or a Diagnostic-Code). See the
 * header for the order: phrases (in the text, then in the notice), the enhanced status code,
 * the reply code, the permanence words; a hard result is softened by a class 4 code or by a
 * refusal after DATA.
 */
export function classifyText(text: string, input: TextInput = {}): Classification {
  const normalized = normalizeText(text);
  const notice = input.notice ? normalizeText(input.notice) : '';
  const textStatus = findEnhancedCode(normalized) ?? (notice ? findEnhancedCode(notice) : null);
  let status = normalizeStatus(input.status);
  // "5.0.0" says only "permanent": the diagnostic's own code (5.1.1, 5.7.1) says more.
  if (status && /^\d\.0\.0$/.test(status) && textStatus && textStatus[0] === status[0]) status = textStatus;
  status ??= textStatus;
  const replyCode = findReplyCode(normalized) ?? (notice ? findReplyCode(notice) : null);
  const codeClass = status?.[0] ?? replyCode?.[0] ?? null;
  const hasText = normalized.length > 0 || notice.length > 0;

  // An explicit X.1.7/X.1.8 says the refused address is the sender's, whatever the words
  // ("No such domain") say. X.0.x says nothing the reply code would not say better.
  const senderStatus = status && /^[45]\.1\.[78]$/.test(status) ? firstMatch(STATUS_RULES, status) : null;
  const genericStatus = status !== null && /^\d\.0\.\d{1,3}$/.test(status);
  const statusRule = status ? firstMatch(STATUS_RULES, status) : null;
  const replyRule = replyCode ? firstMatch(REPLY_RULES, replyCode) : null;
  const rule =
    senderStatus ??
    firstMatch(PHRASE_RULES, normalized) ??
    (notice ? firstMatch(PHRASE_RULES, notice) : null) ??
    (genericStatus ? replyRule ?? statusRule : statusRule ?? replyRule) ??
    firstMatch(FALLBACK_RULES, normalized) ??
    (notice ? firstMatch(FALLBACK_RULES, notice) : null);
  if (!rule) return verdict('undetermined', null, status, replyCode, hasText);
  if (rule.outcome === 'hard_bounced') {
    // Class 4 is a temporary condition whatever the words: never condemn the address for it.
    if (codeClass === '4') return verdict('soft_bounced', rule, status, replyCode, hasText);
    if (REFUSED_BEFORE_RCPT.test(normalized) || REFUSED_BEFORE_RCPT.test(notice)) {
      return verdict('soft_bounced', BEFORE_RCPT_RULE, status, replyCode, hasText);
    }
    // Refused after DATA, the address was accepted; only an explicit X.1.x or a vendor's own
    // statement that the account does not exist still condemns it.
    const addressStatus = (status !== null && /^5\.1\./.test(status)) || rule.name === 'vendor_account_missing';
    if (!addressStatus && (REFUSED_AFTER_DATA.test(normalized) || REFUSED_AFTER_DATA.test(notice))) {
      return verdict('soft_bounced', AFTER_DATA_RULE, status, replyCode, hasText);
    }
  }
  return verdict(rule.outcome, rule, status, replyCode, hasText);
}

const AFTER_DATA_RULE: BounceRule = { name: 'refused_after_data', pattern: REFUSED_AFTER_DATA, outcome: 'soft_bounced' };
const BEFORE_RCPT_RULE: BounceRule = { name: 'refused_before_rcpt', pattern: REFUSED_BEFORE_RCPT, outcome: 'soft_bounced', delay: 'policy' };

const DELIVERED_ACTIONS = new Set(['delivered', 'relayed', 'expanded']);

/** One recipient of a delivery status notification (RFC 3464). See the header for the rules. */
export function classifyDsnRecipient(fields: DsnRecipientFields): Classification {
  const action = fields.action?.trim().toLowerCase().split(/[\s(;]/, 1)[0] ?? '';
  const status = normalizeStatus(fields.status);
  const diagnostic = fields.diagnosticCode ?? '';
  const notice = fields.notice ?? null;

  if (DELIVERED_ACTIONS.has(action)) return verdict('delivered', null, status, null, false);
  // An action outside RFC 3464 ("deliverable" from Postfix's verify mode) with a success status.
  if (action !== 'failed' && action !== 'delayed' && status?.[0] === '2') return verdict('delivered', null, status, null, false);
  if (action === 'delayed') {
    const found = classifyText(diagnostic, { status, notice });
    const rule = found.rule ? BOUNCE_RULES.find((r) => r.name === found.rule) ?? null : null;
    const described = diagnostic.trim().length > 0 || status !== null || (notice ?? '').trim().length > 0;
    return { ...found, outcome: 'delayed', delayType: delayTypeOf(rule, described) };
  }
  // 'failed', and a missing or unknown action: a report that came back is a failure report
  // unless it says otherwise.
  if (status && status[0] === '4') {
    const found = classifyText(diagnostic, { status, notice });
    return { ...found, outcome: 'soft_bounced', rule: found.outcome === 'soft_bounced' ? found.rule : 'status_transient', delayType: null };
  }
  const found = classifyText(diagnostic, { status: status && status[0] === '5' ? status : null, notice });
  // A DSN that says failed is final: a delay wording in its diagnostic is only history.
  if (found.outcome === 'delayed') return { ...found, outcome: 'soft_bounced', delayType: null };
  return found;
}

/** bounce_type for a failed recipient's outcome; null for outcomes that are not bounces. */
export function bounceType(outcome: ReportOutcome): BounceType | null {
  if (outcome === 'hard_bounced') return 'hard';
  if (outcome === 'soft_bounced') return 'soft';
  if (outcome === 'undetermined') return 'undetermined';
  return null;
}

/** complaint_type of an ARF Feedback-Type value. */
export function complaintType(feedbackType: string | null | undefined): ComplaintType {
  const value = (feedbackType ?? '').trim().toLowerCase();
  return (COMPLAINT_TYPES as readonly string[]).includes(value) ? (value as ComplaintType) : 'other';
}

/**
 * The outcome of an ARF report. not-spam is the opposite of a complaint and auth-failure
 * (RFC 6591) is a DMARC forensic report about the message's authentication, not the
 * recipient's wish: neither is 'complained', so neither suppresses the address.
 */
export function complaintOutcome(feedbackType: string | null | undefined): ReportOutcome {
  const type = complaintType(feedbackType);
  return type === 'not-spam' || type === 'auth-failure' ? 'undetermined' : 'complained';
}

export const MAX_REASON_LENGTH = 300;

/**
 * A short reason for people: the status and the diagnostic ("5.1.1 550 5.1.1 <a@b>: Recipient
 * address rejected: User unknown"), the diagnostic's "smtp;" type dropped, one line, bounded.
 */
export function bounceReason(input: { status?: string | null; diagnosticCode?: string | null; action?: string | null }): string {
  const status = (input.status ?? '').replace(/\s+/g, ' ').trim().slice(0, 40);
  const diagnostic = (input.diagnosticCode ?? '')
    .slice(0, 4 * MAX_REASON_LENGTH)
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^(?:smtp|x-[\w-]+|[\w-]{1,20});\s*/i, '');
  const statusCode = normalizeStatus(status);
  let reason: string;
  if (diagnostic && status) reason = statusCode && diagnostic.includes(statusCode) ? diagnostic : `${status} ${diagnostic}`;
  else reason = diagnostic || status || (input.action ? input.action.trim().toLowerCase().slice(0, 40) : '') || 'no diagnostic given';
  return reason.length > MAX_REASON_LENGTH ? `${reason.slice(0, MAX_REASON_LENGTH - 1)}…` : reason;
}
