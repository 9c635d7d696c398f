import { afterEach, describe, expect, it, vi } from 'vitest'
import { api, setUnauthenticatedHandler } from './api'
import { ApiError, errorMessage } from './errors'

function answer(status: number, body: unknown, headers: Record<string, string> = {}) {
  return vi.fn(async (_url: string, _init?: RequestInit) => new Response(body === undefined ? null : JSON.stringify(body), { status, headers }))
}

afterEach(() => {
  vi.unstubAllGlobals()
  setUnauthenticatedHandler(() => {})
})

describe('api', () => {
  it('sends same-origin JSON with the cookie', async () => {
    const fetch = answer(202, { message: { id: 'm' }, run: { id: 'r' } })
    vi.stubGlobal('fetch', fetch)
    await api.postMessage('agt/1', 'hello')
    const [url, init] = fetch.mock.calls[0]
    expect(url).toBe('/api/agents/agt%2F1/messages')
    expect(init?.method).toBe('POST')
    expect(init?.credentials).toBe('same-origin')
    expect((init?.headers as Record<string, string>)['Content-Type']).toBe('application/json')
    expect(init?.body).toBe('{"content":"hello"}')
  })

  it('turns a throttled login into the wait in words', async () => {
    vi.stubGlobal('fetch', answer(429, { error: { code: 'throttled', message: 'Too many login attempts.' } }, { 'Retry-After': '17' }))
    const err = await api.login('a@example.com', 'x').catch((e) => e)
    expect(err).toBeInstanceOf(ApiError)
    expect(errorMessage(err)).toBe('Too many attempts. Try again in 17 seconds.')
  })

  it('keeps an admission refusal’s reason and message', async () => {
    vi.stubGlobal(
      'fetch',
      answer(422, { error: { code: 'admission_denied', reason: 'busy', message: 'A run of this agent is still going.' } }),
    )
    const err = await api.postMessage('agt_1', 'again').catch((e) => e)
    expect(err.reason).toBe('busy')
    expect(errorMessage(err)).toBe('A run of this agent is still going.')
  })

  it('calls the 401 handler, except while signing in', async () => {
    const on401 = vi.fn()
    setUnauthenticatedHandler(on401)
    vi.stubGlobal('fetch', answer(401, { error: { code: 'unauthenticated', message: 'Please log in.' } }))
    await api.agents().catch(() => {})
    expect(on401).toHaveBeenCalledTimes(1)
    await api.login('a@example.com', 'wrong').catch(() => {})
    await api.me().catch(() => {})
    expect(on401).toHaveBeenCalledTimes(1)
  })

  it('answers 204 with nothing', async () => {
    vi.stubGlobal('fetch', answer(204, undefined))
    await expect(api.deleteAgent('agt_1')).resolves.toBeUndefined()
  })

  it('words a network failure', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => {
        throw new TypeError('Failed to fetch')
      }),
    )
    const err = await api.agents().catch((e) => e)
    expect(err.code).toBe('network')
    expect(errorMessage(err)).toBe('Could not reach the server. Check your connection and try again.')
  })

  describe('change set decisions', () => {
    const cases: { name: string; call: () => Promise<unknown>; url: string; body: string | undefined }[] = [
      { name: 'approve all', call: () => api.approve('chg/1'), url: '/api/changes/chg%2F1/approve', body: undefined },
      { name: 'reject all', call: () => api.reject('chg_1'), url: '/api/changes/chg_1/reject', body: undefined },
      {
        name: 'approve some',
        call: () => api.approve('chg_1', ['a.txt', 'dir/b\nc']),
        url: '/api/changes/chg_1/approve',
        body: '{"paths":["a.txt","dir/b\\nc"]}',
      },
      { name: 'reject some', call: () => api.reject('chg_1', ['a.txt']), url: '/api/changes/chg_1/reject', body: '{"paths":["a.txt"]}' },
    ]
    for (const c of cases) {
      it(`${c.name} posts ${c.body ?? 'no body'}`, async () => {
        const fetch = answer(200, { id: 'chg_1', entries: [] })
        vi.stubGlobal('fetch', fetch)
        await c.call()
        const [url, init] = fetch.mock.calls[0]
        expect(url).toBe(c.url)
        expect(init?.method).toBe('POST')
        expect(init?.body).toBe(c.body)
      })
    }

    it('refuses an empty list instead of deciding everything', async () => {
      const fetch = answer(200, {})
      vi.stubGlobal('fetch', fetch)
      for (const call of [() => api.approve('chg_1', []), () => api.reject('chg_1', [])]) {
        const err = await call().catch((e) => e)
        expect(err).toBeInstanceOf(ApiError)
        expect(err.code).toBe('invalid_input')
      }
      expect(fetch).not.toHaveBeenCalled()
    })

    it('keeps a conflict’s words', async () => {
      const message = 'notes.txt changed in the workspace since the run; nothing was applied.'
      vi.stubGlobal('fetch', answer(409, { error: { code: 'conflict', message } }))
      const err = await api.approve('chg_1', ['notes.txt']).catch((e) => e)
      expect(err.code).toBe('conflict')
      expect(errorMessage(err)).toBe(message)
    })
  })
})
