import { createHmac } from "node:crypto";
import { isIPv6 } from "node:net";
import { USER_ID } from "./map";
import type { SpanRow } from "./row";
import type { RedactionPolicy } from "./redaction-policy";

/*
 * Pattern-based PII and secret detectors for the redact stage.
 *
 * Message columns hold JSON text and are redacted as text, without parsing. A replacement keeps the JSON
 * valid because no match contains `"` or `\` (except whole escape sequences inside a private key block)
 * and no match starts inside an escape sequence: every match starts after a whole `\n`, `\r`, `\t` or
 * `\uXXXX` escape or after a character that is neither a word character nor a backslash. Placeholders
 * hold no quotes or backslashes.
 *
 * Speed: one pass per enabled kind behind cheap pre-checks (a literal, a minimum length, a digit); email
 * and IPv6 scan outwards from `@` and `:` instead of trying a pattern at every position. A combined
 * alternation is about half as fast and re2 far slower (design/INGEST.md, bench/redact.ts).
 */

/** Entity kinds of the RedactionSetting (spec §2), in the order the redactor applies them. */
export const REDACTION_ENTITIES = ["secret", "email", "iban", "credit_card", "us_ssn", "phone", "ip_address"] as const;
export type RedactionEntity = (typeof REDACTION_ENTITIES)[number];

export const PLACEHOLDERS: Record<RedactionEntity, string> = {
  email: "[REDACTED_EMAIL]",
  phone: "[REDACTED_PHONE]",
  credit_card: "[REDACTED_CREDIT_CARD]",
  iban: "[REDACTED_IBAN]",
  us_ssn: "[REDACTED_US_SSN]",
  ip_address: "[REDACTED_IP_ADDRESS]",
  secret: "[REDACTED_SECRET]",
};

/** Returns the text with every match of one kind replaced. */
type Detector = (text: string) => string;

const boundary = (alsoNotAfter = "") => String.raw`(?:(?<=\\[nrt]|\\u[0-9A-Fa-f]{4})|(?<![\w\\${alsoNotAfter}]))`;
const START = boundary();
/** Digits inside decimals and dotted or dashed ids are not PII. */
const NUMBER_START = boundary(String.raw`.+\-`);
const NUMBER_END = String.raw`(?!\w|[.\-]\d)`;

// ---- secrets ---------------------------------------------------------------------------------------

/** Random tokens have a digit or mixed case; hyphenated prose such as "sk-learn-compatible-…" has neither. */
const looksRandom = (token: string) => /\d/.test(token) || (/[a-z]/.test(token) && /[A-Z]/.test(token));

interface SecretPattern {
  /** Literals of which one must occur for the pattern to be tried. */
  markers: string[];
  pattern: RegExp;
  replace: (match: string, ...groups: string[]) => string;
}

const SECRET = PLACEHOLDERS.secret;
const whole = () => SECRET;
const ifRandom = (match: string) => (looksRandom(match) ? SECRET : match);

const SECRET_PATTERNS: SecretPattern[] = [
  {
    // OpenAI (sk-…, sk-proj-…), Anthropic (sk-ant-…), Stripe secret and restricted keys (sk_live_…, rk_live_…).
    markers: ["sk-", "sk_", "rk_"],
    pattern: new RegExp(START + String.raw`(?:sk-|sk_|rk_)[A-Za-z0-9_-]{20,}`, "g"),
    replace: ifRandom,
  },
  {
    markers: ["AKIA", "ASIA"],
    pattern: new RegExp(START + String.raw`(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])`, "g"),
    replace: whole,
  },
  {
    markers: ["gh", "github_pat_"],
    pattern: new RegExp(START + String.raw`(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`, "g"),
    replace: whole,
  },
  {
    markers: ["xox"],
    pattern: new RegExp(START + String.raw`xox[abeposr]-[A-Za-z0-9-]{10,}`, "g"),
    replace: ifRandom,
  },
  {
    markers: ["AIza"],
    pattern: new RegExp(START + String.raw`AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])`, "g"),
    replace: whole,
  },
  {
    markers: ["eyJ"],
    pattern: new RegExp(START + String.raw`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, "g"),
    replace: whole,
  },
  {
    // Keeps the scheme so "Authorization: Bearer [REDACTED_SECRET]" still reads as what it was.
    markers: ["earer", "EARER"],
    pattern: new RegExp(START + String.raw`(Bearer|bearer|BEARER)( {1,4})([A-Za-z0-9._~+/-]{16,}=*)`, "g"),
    replace: (match, scheme, space, token) => (looksRandom(token) ? scheme + space + SECRET : match),
  },
];

const PRIVATE_KEY_BEGIN = /-----BEGIN[A-Z ]*PRIVATE KEY-----/g;
const PRIVATE_KEY_END = /-----END[A-Z ]*PRIVATE KEY-----/y;
/** Longest distance from BEGIN to END considered one block; keys are a few KB. */
const PRIVATE_KEY_MAX_LENGTH = 16_000;
const isBase64OrSpace = (c: number) =>
  (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 47 && c <= 57) || c === 43 || c === 61 || c === 32 || c === 10 || c === 13 || c === 9;

/**
 * Base64, white space and line-break escapes at any nesting depth (`\n`, `\\n`, …): a run of backslashes is
 * taken only with the letter after it, so an escaped quote (`\"`, `\\\"`) at any level stays whole.
 */
function endOfBase64Body(text: string, from: number): number {
  let end = from;
  while (end < text.length) {
    if (isBase64OrSpace(text.charCodeAt(end))) {
      end++;
      continue;
    }
    let letter = end;
    while (text.charCodeAt(letter) === BACKSLASH) letter++;
    const c = text.charCodeAt(letter);
    if (letter === end || !(c === 110 || c === 114 || c === 116)) break;
    end = letter + 1;
  }
  return end;
}

/**
 * PEM private key blocks, from BEGIN through END when END follows before any quote (inside JSON the line
 * breaks are escapes, which the block then covers whole). A block cut off before its END line is redacted
 * to the end of its base64 body. Scans with indexOf, never rescanning: many BEGIN lines stay linear.
 */
function redactPrivateKeys(text: string): string {
  let out = "";
  let copiedUpTo = 0;
  // Next END line and next quote at or after the current body; -1 when there is none, 0 before the first search.
  let endAt = 0;
  let quoteAt = 0;
  PRIVATE_KEY_BEGIN.lastIndex = 0;
  for (let begin = PRIVATE_KEY_BEGIN.exec(text); begin; begin = PRIVATE_KEY_BEGIN.exec(text)) {
    const body = begin.index + begin[0].length;
    if (endAt !== -1 && endAt < body) endAt = text.indexOf("-----END", body);
    if (quoteAt !== -1 && quoteAt < body) quoteAt = text.indexOf('"', body);
    let end = body;
    if (endAt !== -1 && (quoteAt === -1 || endAt < quoteAt) && endAt - body <= PRIVATE_KEY_MAX_LENGTH) {
      PRIVATE_KEY_END.lastIndex = endAt;
      if (PRIVATE_KEY_END.test(text)) end = PRIVATE_KEY_END.lastIndex;
    }
    if (end === body) end = endOfBase64Body(text, body);
    out += text.slice(copiedUpTo, begin.index) + SECRET;
    copiedUpTo = PRIVATE_KEY_BEGIN.lastIndex = end;
  }
  return copiedUpTo === 0 ? text : out + text.slice(copiedUpTo);
}

const redactSecrets: Detector = (text) => {
  if (text.includes("PRIVATE KEY-----")) text = redactPrivateKeys(text);
  for (const { markers, pattern, replace } of SECRET_PATTERNS) {
    if (markers.some((marker) => text.includes(marker))) text = text.replace(pattern, replace as (match: string) => string);
  }
  return text;
};

// ---- email -----------------------------------------------------------------------------------------

const isLocalPartChar = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
const isDomainChar = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 45;
const isHexChar = (c: number) => (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
const BACKSLASH = 92;
const DOT = 46;
const HYPHEN = 45;
/** File names such as `icon@2x.png` have the shape of an address. */
const NOT_TOP_LEVEL_DOMAINS = new Set(["png", "jpg", "jpeg", "gif", "svg", "webp"]);

/** Scans from each `@` outwards instead of running a pattern at every position: the dominant cost of naive email regexes. */
const redactEmails: Detector = (text) => {
  let at = text.indexOf("@");
  if (at < 0) return text;
  let out = "";
  let copiedUpTo = 0;
  while (at >= 0) {
    let start = at;
    while (start > copiedUpTo && isLocalPartChar(text.charCodeAt(start - 1))) start--;
    if (start > 0 && text.charCodeAt(start - 1) === BACKSLASH) {
      // The first character is the letter of an escape (`\n`, `\u00e9`): the address starts after it.
      const unicodeEscape = text[start] === "u" && [1, 2, 3, 4].every((i) => isHexChar(text.charCodeAt(start + i)));
      start += unicodeEscape ? 5 : 1;
    }
    while (start < at && text.charCodeAt(start) === DOT) start++;
    let end = at + 1;
    while (end < text.length && isDomainChar(text.charCodeAt(end))) end++;
    while (end > at + 1 && (text.charCodeAt(end - 1) === DOT || text.charCodeAt(end - 1) === HYPHEN)) end--;
    if (start < at && isEmailDomain(text.slice(at + 1, end))) {
      out += text.slice(copiedUpTo, start) + PLACEHOLDERS.email;
      copiedUpTo = end;
      at = text.indexOf("@", end);
    } else {
      at = text.indexOf("@", at + 1);
    }
  }
  return copiedUpTo === 0 ? text : out + text.slice(copiedUpTo);
};

function isEmailDomain(domain: string): boolean {
  const labels = domain.split(".");
  if (labels.length < 2 || labels.some((label) => label === "")) return false;
  const topLevel = labels[labels.length - 1];
  return /^[A-Za-z]{2,}$/.test(topLevel) && !NOT_TOP_LEVEL_DOMAINS.has(topLevel.toLowerCase());
}

// ---- credit cards ----------------------------------------------------------------------------------

function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = digits.length - 1, double = false; i >= 0; i--, double = !double) {
    let digit = digits.charCodeAt(i) - 48;
    if (double && (digit *= 2) > 9) digit -= 9;
    sum += digit;
  }
  return sum % 10 === 0;
}

/** Issuer prefixes and lengths keep timestamps and other long numbers out; Luhn does the rest. */
function isCardNumber(digits: string): boolean {
  const length = digits.length;
  const p2 = Number(digits.slice(0, 2));
  const p3 = Number(digits.slice(0, 3));
  const p4 = Number(digits.slice(0, 4));
  const issued =
    (digits[0] === "4" && (length === 13 || length === 16 || length === 19)) || // Visa
    (((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) && length === 16) || // Mastercard
    ((p2 === 34 || p2 === 37) && length === 15) || // American Express
    ((p4 === 6011 || p2 === 65 || (p3 >= 644 && p3 <= 649) || p2 === 62) && length >= 16) || // Discover, UnionPay
    (p4 >= 3528 && p4 <= 3589 && length >= 16) || // JCB
    (((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) && length >= 14) || // Diners Club
    ((p2 === 50 || (p2 >= 56 && p2 <= 58) || p2 === 63 || p2 === 67) && length >= 12); // Maestro
  return issued && luhnValid(digits);
}

const CARD_PATTERN = new RegExp(NUMBER_START + String.raw`\d{4}[ -]?\d(?:[ -]?\d){7,14}` + NUMBER_END, "g");

/** Written as one run of digits, or in groups of 4–6 digits (the last one shorter) with one kind of separator. */
function isCardLayout(candidate: string): boolean {
  const separator = candidate.includes(" ") ? " " : "-";
  const groups = candidate.split(separator);
  if (groups.length === 1) return true;
  return groups.every((group, i) => /^\d+$/.test(group) && group.length <= 6 && (group.length >= 4 || i === groups.length - 1));
}

const redactCards: Detector = (text) =>
  text.replace(CARD_PATTERN, (candidate) =>
    isCardLayout(candidate) && isCardNumber(candidate.replace(/[ -]/g, "")) ? PLACEHOLDERS.credit_card : candidate,
  );

// ---- IBAN ------------------------------------------------------------------------------------------

/** Country code → IBAN length (SWIFT IBAN registry). */
const IBAN_LENGTHS: Record<string, number> = Object.fromEntries(
  (
    "AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DJ27 DK18 DO28 EE20 EG29 " +
    "ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 " +
    "LC32 LI21 LT20 LU20 LV21 LY25 MC27 MD24 ME22 MK19 MN20 MR27 MT31 MU30 NI28 NL18 NO15 OM23 PK24 PL28 PS29 QA29 " +
    "RO24 RS22 RU33 SA24 SC31 SD18 SE24 SI19 SK24 SM27 SO23 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20 YE30"
  )
    .split(" ")
    .map((entry) => [entry.slice(0, 2), Number(entry.slice(2))]),
);

function ibanChecksumValid(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    remainder = c >= 65 ? (remainder * 100 + (c - 55)) % 97 : (remainder * 10 + (c - 48)) % 97;
  }
  return remainder === 1;
}

const IBAN_PATTERN = new RegExp(START + String.raw`[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])`, "g");

/** The candidate may run into following words ("… 0130 00 ABC"): the country's length says where the IBAN ends. */
function redactIbanCandidate(candidate: string): string {
  const length = IBAN_LENGTHS[candidate.slice(0, 2)];
  if (!length) return candidate;
  let compact = "";
  let end = 0;
  while (end < candidate.length && compact.length < length) {
    if (candidate[end] !== " ") compact += candidate[end];
    end++;
  }
  if (compact.length !== length || (end < candidate.length && candidate[end] !== " ")) return candidate;
  return ibanChecksumValid(compact) ? PLACEHOLDERS.iban + candidate.slice(end) : candidate;
}

const redactIbans: Detector = (text) => text.replace(IBAN_PATTERN, redactIbanCandidate);

// ---- US social security numbers --------------------------------------------------------------------

const SSN_PATTERN = new RegExp(NUMBER_START + String.raw`(\d{3})([ -])(\d{2})\2(\d{4})` + NUMBER_END, "g");

/** Area 000, 666 and 900–999, group 00 and serial 0000 are never issued. */
const redactSsns: Detector = (text) =>
  text.replace(SSN_PATTERN, (match, area: string, _separator: string, group: string, serial: string) =>
    area === "000" || area === "666" || area[0] === "9" || group === "00" || serial === "0000" ? match : PLACEHOLDERS.us_ssn,
  );

// ---- phone numbers ---------------------------------------------------------------------------------

const PHONE_PATTERN = new RegExp(
  NUMBER_START +
    "(?:" +
    // international: +44 20 7946 0958, +1 (555) 123-4567, +4915112345678
    String.raw`(\+[1-9]\d{0,2}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,6})){1,6})` +
    // North American: (555) 123-4567, 555-123-4567, 1 555.123.4567
    String.raw`|((?:1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4})` +
    // national with trunk prefix 0: 020 7946 0958, 06 12 34 56 78, 030-12345678
    String.raw`|(0\d{1,4}(?:[ -]\d{2,8}){1,4})` +
    ")" +
    NUMBER_END,
  "g",
);

const digitCount = (text: string) => {
  let count = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) count++;
  return count;
};

function isPhoneNumber(international: string | undefined, northAmerican: string | undefined, national: string | undefined): boolean {
  if (international) {
    const digits = digitCount(international);
    return digits >= 10 && digits <= 15;
  }
  if (northAmerican) {
    const digits = northAmerican.replace(/\D/g, "");
    // Area codes never start with 0 or 1: keeps "100 200 3000" out.
    return digits[digits.length === 11 ? 1 : 0] >= "2";
  }
  const digits = digitCount(national!);
  return digits >= 10 && digits <= 12 && !(national!.includes(" ") && national!.includes("-"));
}

const redactPhones: Detector = (text) =>
  text.replace(PHONE_PATTERN, (match, international?: string, northAmerican?: string, national?: string) =>
    isPhoneNumber(international, northAmerican, national) ? PLACEHOLDERS.phone : match,
  );

// ---- IP addresses ----------------------------------------------------------------------------------

/** Candidates only: octet ranges in the pattern itself run at a fifth of the speed. */
const IPV4_CANDIDATE = new RegExp(NUMBER_START + String.raw`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\w|\.\d)`, "g");
/** 0–255 without leading zeros. */
const isOctet = (octet: string) => Number(octet) <= 255 && (octet.length === 1 || octet[0] !== "0");
const isIpv4Address = (candidate: string) => candidate.split(".").every(isOctet);
const isIpv6Char = (c: number) => isHexChar(c) || c === COLON || c === DOT;
const isWordChar = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95;
const COLON = 58;

/** Two hex groups at least: bare `::` or `::1` only look like addresses in code. */
const isIpv6Address = (candidate: string) => isIPv6(candidate) && candidate.split(":").filter((group) => group !== "").length >= 2;

/**
 * Looks only around colons that sit between hex digits: JSON has a colon per key, prose has few, so this
 * is much cheaper than a pattern that starts at every hex letter.
 */
const redactIpv6: Detector = (text) => {
  let colon = text.indexOf(":");
  let out = "";
  let copiedUpTo = 0;
  while (colon >= 0) {
    const before = text.charCodeAt(colon - 1);
    const after = text.charCodeAt(colon + 1);
    if (!(isHexChar(before) || before === COLON) || !(isHexChar(after) || after === COLON)) {
      colon = text.indexOf(":", colon + 1);
      continue;
    }
    let start = colon;
    while (start > copiedUpTo && isIpv6Char(text.charCodeAt(start - 1))) start--;
    const afterUnicodeEscape = text[start - 1] === "u" && text.charCodeAt(start - 2) === BACKSLASH;
    if (afterUnicodeEscape) start += 4; // the hex digits of `\u00e9` belong to the escape
    let end = colon + 1;
    while (end < text.length && isIpv6Char(text.charCodeAt(end))) end++;
    while (end > colon + 1 && (text.charCodeAt(end - 1) === DOT || (text.charCodeAt(end - 1) === COLON && text.charCodeAt(end - 2) !== COLON))) end--;
    const preceding = text.charCodeAt(start - 1);
    const afterEscape =
      afterUnicodeEscape || (start >= 2 && text.charCodeAt(start - 2) === BACKSLASH && (preceding === 110 || preceding === 114 || preceding === 116));
    // After a backslash the first character would be the letter of an escape such as `\f`.
    const atBoundary = start === 0 || (!isWordChar(preceding) && preceding !== BACKSLASH) || afterEscape;
    if (atBoundary && isIpv6Address(text.slice(start, end))) {
      out += text.slice(copiedUpTo, start) + PLACEHOLDERS.ip_address;
      copiedUpTo = end;
    }
    colon = text.indexOf(":", Math.max(end, colon + 1));
  }
  return copiedUpTo === 0 ? text : out + text.slice(copiedUpTo);
};

const redactIpv4: Detector = (text) =>
  text.replace(IPV4_CANDIDATE, (candidate) => (isIpv4Address(candidate) ? PLACEHOLDERS.ip_address : candidate));
/** IPv6 first: its candidates may end in an embedded IPv4 address (`::ffff:192.0.2.1`). */
const redactIpAddresses: Detector = (text) => redactIpv4(redactIpv6(text));

// ---- policy → redactor -----------------------------------------------------------------------------

const DIGIT = /\d/;

/** Skips texts too short for a match, and texts without a digit where every match has one: most attribute values. */
const gated =
  (minLength: number, needsDigit: boolean, detect: Detector): Detector =>
  (text) =>
    text.length < minLength || (needsDigit && !DIGIT.test(text)) ? text : detect(text);

const DETECTORS: Record<RedactionEntity, Detector> = {
  secret: gated(15, false, redactSecrets),
  email: gated(6, false, redactEmails),
  iban: gated(15, true, redactIbans),
  credit_card: gated(12, true, redactCards),
  us_ssn: gated(11, true, redactSsns),
  phone: gated(10, true, redactPhones),
  ip_address: gated(4, false, redactIpAddresses),
};

/** Which of `entities` occur in the text; for detectors that report rather than redact (pii-leakage). */
export function findEntities(text: string, entities: readonly RedactionEntity[] = REDACTION_ENTITIES): RedactionEntity[] {
  return REDACTION_ENTITIES.filter((entity) => entities.includes(entity) && DETECTORS[entity](text) !== text);
}

/** Message and tool content, and the JSON columns that carry attributes of events and links. */
const CONTENT_COLUMNS = [
  "input_messages",
  "output_messages",
  "system_instructions",
  "tool_input",
  "tool_output",
  "tool_definitions",
  "status_message",
  "events_json",
  "links_json",
] as const satisfies readonly (keyof SpanRow)[];

/** Attributes that carry the user's identity: governed by `identities`, not by content scanning. */
const IDENTITY_ATTRIBUTES = new Set([...USER_ID, "user.email"]);

export interface SpanRedactor {
  readonly policy: RedactionPolicy;
  /** True when the policy changes nothing: callers may skip the stage. */
  readonly isNoop: boolean;
  redactText(text: string): string;
  /** Redacts the row in place and returns it. */
  redactRow(row: SpanRow): SpanRow;
}

const PSEUDONYM_PREFIX = "user_";
/** Keys such as `userId`, `user_email`, `langfuse.user.id`; an id like "1" elsewhere is left alone. */
const IDENTITY_KEY = /user|email/i;

class PolicyRedactor implements SpanRedactor {
  readonly isNoop: boolean;
  private readonly detectors: Detector[];
  private readonly organizationKeys = new Map<string, Buffer>();

  constructor(
    readonly policy: RedactionPolicy,
    private readonly pseudonymSecret: string | null,
  ) {
    this.detectors = policy.mode === "enforce" ? REDACTION_ENTITIES.filter((e) => policy.entities.includes(e)).map((e) => DETECTORS[e]) : [];
    this.isNoop = this.detectors.length === 0 && policy.identities === "keep";
  }

  redactText(text: string): string {
    for (const detect of this.detectors) text = detect(text);
    return text;
  }

  redactRow(row: SpanRow): SpanRow {
    if (this.policy.identities === "pseudonymize") this.pseudonymizeIdentities(row);
    if (this.detectors.length === 0) return row;
    const { input_messages: input, output_messages: output } = row;
    for (const column of CONTENT_COLUMNS) if (row[column]) row[column] = this.redactText(row[column]);
    // `message_text` holds the text parts of those two columns: when neither had a match it has none
    // either, unless the JSON spelled characters as \u escapes that the text holds as themselves.
    const messagesClean = input === row.input_messages && output === row.output_messages && !input.includes("\\u") && !output.includes("\\u");
    if (row.message_text && !messagesClean) row.message_text = this.redactText(row.message_text);
    for (const key in row.attr_string) {
      if (!IDENTITY_ATTRIBUTES.has(key)) row.attr_string[key] = this.redactText(row.attr_string[key]);
    }
    this.redactValues(row.resource_string);
    if (this.policy.scopes.metadata) {
      this.redactValues(row.metadata);
      row.tags = row.tags.map((tag) => this.redactText(tag));
    }
    return row;
  }

  private redactValues(map: Record<string, string>) {
    for (const key in map) map[key] = this.redactText(map[key]);
  }

  /**
   * Replaces the user id and email in the column and in every attribute or metadata entry that holds one
   * of them under a user or email key, so the pseudonym stays consistent whatever key a mapper kept them
   * under. Without a secret they are removed.
   */
  private pseudonymizeIdentities(row: SpanRow) {
    const identities = new Map<string, string>();
    const replacementFor = (value: string) =>
      this.pseudonymSecret === null ? "" : PSEUDONYM_PREFIX + this.pseudonym(row.organization_id, value);
    if (row.user_id) identities.set(row.user_id, replacementFor(row.user_id));
    for (const key of IDENTITY_ATTRIBUTES) {
      const value = row.attr_string[key];
      if (value && !identities.has(value)) identities.set(value, replacementFor(value));
    }
    if (identities.size === 0) return;
    row.user_id = identities.get(row.user_id) ?? row.user_id;
    for (const map of [row.attr_string, row.metadata, row.resource_string]) {
      for (const key in map) {
        const replacement = identities.get(map[key]);
        if (replacement !== undefined && (IDENTITY_ATTRIBUTES.has(key) || IDENTITY_KEY.test(key))) {
          if (replacement === "") delete map[key];
          else map[key] = replacement;
        } else if (map[key].startsWith("{")) {
          // A structured attribute kept as sent (`latitude.metadata`) holds the identity as a JSON string.
          for (const [identity, replaced] of identities) map[key] = map[key].replaceAll(JSON.stringify(identity), JSON.stringify(replaced));
        }
      }
    }
  }

  /** HMAC-SHA256 under a per-organization key derived from PSEUDONYM_SECRET: stable within an organization, unlinkable across them. */
  private pseudonym(organizationId: string, value: string): string {
    let key = this.organizationKeys.get(organizationId);
    if (!key) {
      key = createHmac("sha256", this.pseudonymSecret!).update(organizationId).digest();
      this.organizationKeys.set(organizationId, key);
    }
    return createHmac("sha256", key).update(value).digest("hex").slice(0, 16);
  }
}

const compiledRedactors = new Map<string, SpanRedactor>();

/** Equal for policies that redact the same way, whatever order their entities are listed in. */
const redactorKey = (policy: RedactionPolicy, pseudonymSecret: string | null) =>
  [
    policy.mode,
    REDACTION_ENTITIES.filter((entity) => policy.entities.includes(entity)).join(","),
    policy.scopes.metadata,
    policy.identities,
    pseudonymSecret ?? "",
  ].join("|");

/** The redactor of a policy, compiled once per distinct policy so the hot path does no setup. */
export function compileRedactor(policy: RedactionPolicy, pseudonymSecret: string | null): SpanRedactor {
  const key = redactorKey(policy, pseudonymSecret);
  let redactor = compiledRedactors.get(key);
  if (!redactor) {
    redactor = new PolicyRedactor(policy, pseudonymSecret);
    compiledRedactors.set(key, redactor);
  }
  return redactor;
}

/** Applies `policy` to one row in place and returns it. */
export function redactRow(row: SpanRow, policy: RedactionPolicy, pseudonymSecret: string | null): SpanRow {
  return compileRedactor(policy, pseudonymSecret).redactRow(row);
}
