// Template slugs: how senders name a template (`template` of a TemplateSend), unique per project.

export const MAX_SLUG_LENGTH = 80;

/** Lowercase alphanumerics separated by single hyphens: no leading, trailing or doubled hyphen. */
export const SLUG_PATTERN = '^[a-z0-9]+(-[a-z0-9]+)*$';

const slugRegex = new RegExp(SLUG_PATTERN);

export const isSlug = (value: string): boolean => value.length <= MAX_SLUG_LENGTH && slugRegex.test(value);
