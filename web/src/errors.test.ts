import { describe, expect, it } from 'vitest'
import { ApiError, errorFromAnswer, errorMessage, isNotFound, networkError, parseRetryAfter } from './errors'

describe('errorFromAnswer and errorMessage', () => {
  const cases: { name: string; status: number; body: unknown; retryAfter?: string | null; code: string; message: string; reason?: string }[] = [
    {
      name: 'the server’s words are kept',
      status: 401,
      body: { error: { code: 'unauthenticated', message: 'Wrong email or password.' } },
      code: 'unauthenticated',
      message: 'Wrong email or password.',
    },
    {
      name: 'throttled with Retry-After',
      status: 429,
      body: { error: { code: 'throttled', message: 'Too many login attempts.' } },
      retryAfter: '42',
      code: 'throttled',
      message: 'Too many attempts. Try again in 42 seconds.',
    },
    {
      name: 'throttled for one second',
      status: 429,
      body: { error: { code: 'throttled', message: 'x' } },
      retryAfter: '1',
      code: 'throttled',
      message: 'Too many attempts. Try again in 1 second.',
    },
    {
      name: 'throttled without a usable Retry-After',
      status: 429,
      body: { error: { code: 'throttled', message: 'x' } },
      retryAfter: 'Wed, 21 Oct 2015 07:28:00 GMT',
      code: 'throttled',
      message: 'Too many attempts. Try again in a little while.',
    },
    {
      name: 'admission denied keeps its reason',
      status: 422,
      body: { error: { code: 'admission_denied', message: 'A run of this agent is still going.', reason: 'busy' } },
      code: 'admission_denied',
      message: 'A run of this agent is still going.',
      reason: 'busy',
    },
    {
      name: 'a body that is not JSON',
      status: 502,
      body: null,
      code: 'internal',
      message: 'The server is not available right now. Try again shortly.',
    },
    {
      name: 'an error without a message',
      status: 404,
      body: { error: { code: 'not_found', message: '' } },
      code: 'not_found',
      message: 'Not found.',
    },
    {
      name: 'an unexpected status',
      status: 418,
      body: 'teapot',
      code: 'internal',
      message: 'The server could not do this (HTTP 418).',
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const err = errorFromAnswer(c.status, c.body, c.retryAfter)
      expect(err.status).toBe(c.status)
      expect(err.code).toBe(c.code)
      expect(err.reason).toBe(c.reason)
      expect(errorMessage(err)).toBe(c.message)
    })
  }
})

describe('errorMessage for other failures', () => {
  it('names a network failure', () => {
    expect(errorMessage(networkError())).toBe('Could not reach the server. Check your connection and try again.')
  })
  it('words a plain Error', () => {
    expect(errorMessage(new Error('boom'))).toBe('Something went wrong: boom')
  })
  it('words anything else', () => {
    expect(errorMessage(undefined)).toBe('Something went wrong.')
  })
})

describe('parseRetryAfter', () => {
  const cases: [string | null, number | undefined][] = [
    ['30', 30],
    [' 5 ', 5],
    ['0', 0],
    ['-1', undefined],
    ['1.5', undefined],
    ['', undefined],
    [null, undefined],
  ]
  for (const [h, want] of cases) it(`parseRetryAfter(${JSON.stringify(h)}) = ${want}`, () => expect(parseRetryAfter(h)).toBe(want))
})

describe('isNotFound', () => {
  it('is true for 404 only', () => {
    expect(isNotFound(new ApiError(404, 'not_found', 'x'))).toBe(true)
    expect(isNotFound(new ApiError(403, 'forbidden', 'x'))).toBe(false)
    expect(isNotFound(new Error('x'))).toBe(false)
  })
})
