/** The problem type draft-ietf-httpapi-ratelimit-headers registers for a request over its quota. */
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/**
 * `'json'`: `{"error":"rate_limited","message":…,"retryAfter":3,"policies":["per-key"]}`.
 * `'problem+json'`: RFC 9457 with the draft's `quota-exceeded` type and `violated-policies`.
 */
export type ResponseFormat = 'json' | 'problem+json';

export interface RefusalBody {
  contentType: string;
  body: Record<string, unknown>;
}

/** A human sentence saying what happened and when to retry. */
export function refusalMessage(policies: readonly string[], retryAfter: number | undefined): string {
  const names = policies.map((p) => JSON.stringify(p)).join(', ');
  if (retryAfter === undefined) {
    return `Rate limit exceeded (${names}): this request costs more than the limit allows and will never be accepted; send smaller requests or ask for a higher limit.`;
  }
  return `Rate limit exceeded (${names}): retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`;
}

export function refusalBody(
  format: ResponseFormat,
  status: number,
  message: string,
  policies: readonly string[],
  retryAfter: number | undefined,
): RefusalBody {
  if (format === 'problem+json') {
    return {
      contentType: 'application/problem+json',
      body: {
        type: QUOTA_EXCEEDED,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status,
        detail: message,
        'violated-policies': policies,
        ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }),
      },
    };
  }
  return {
    contentType: 'application/json; charset=utf-8',
    body: {
      error: 'rate_limited',
      message,
      ...(retryAfter === undefined ? {} : { retryAfter }),
      policies,
    },
  };
}

/** A deny-listed client: refused outright, with 403 because waiting will not help. */
export function forbiddenBody(): RefusalBody {
  return {
    contentType: 'application/json; charset=utf-8',
    body: { error: 'forbidden', message: 'This client is not allowed to use this API.' },
  };
}

/** The limiter's store failed and `passOnStoreError` is off: fail closed, but say it is temporary. */
export function unavailableBody(): RefusalBody {
  return {
    contentType: 'application/json; charset=utf-8',
    body: {
      error: 'rate_limiter_unavailable',
      message: 'Rate limiting is temporarily unavailable; retry in 1 second.',
    },
  };
}
