// The first-run screen: on a server with no account yet, signing in
// becomes creating the admin account (or, when signup is not open, says
// how to make it on the server); afterwards the pages are the ordinary ones.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import { LoginPage, SignupPage } from './pages/Auth'
import { SessionContext } from './session'
import { serveRoutes } from './testkit'
import type { Setup, User } from './types'

beforeEach(() => window.history.replaceState(null, '', '/login'))
afterEach(() => vi.unstubAllGlobals())

const alice: User = { id: 'usr_1', email: 'alice@example.com', name: 'Alice', admin: true, disabled: false, created_at: '2025-01-01T00:00:00Z' }

function serve(setup: Setup | null) {
  return serveRoutes((method, url) => {
    if (url === '/api/setup') return setup ? [200, setup] : [500, { error: { code: 'internal', message: 'no' } }]
    if (method === 'POST' && url === '/api/auth/signup') return [201, { user: alice }]
    return undefined
  })
}

function renderWithSession(page: React.ReactNode) {
  const setUser = vi.fn()
  render(<SessionContext.Provider value={{ user: null, setUser }}>{page}</SessionContext.Provider>)
  return setUser
}

describe('the first-run screen', () => {
  for (const [name, page] of [
    ['the sign-in page', <LoginPage key="l" />],
    ['the sign-up page', <SignupPage key="s" />],
  ] as const) {
    it(`replaces ${name} on a brand-new server, and creates the admin account`, async () => {
      const calls = serve({ first_run: true, signup: 'open' })
      const setUser = renderWithSession(page)
      expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe('Create the admin account')
      expect(screen.getByRole('note').textContent).toMatch(/^You are the first person here\. This account administers the server/)
      fireEvent.change(screen.getByLabelText('Email'), { target: { value: 'alice@example.com' } })
      fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'Alice' } })
      fireEvent.change(screen.getByLabelText('Password'), { target: { value: 'correct horse battery' } })
      fireEvent.click(screen.getByRole('button', { name: 'Create the admin account' }))
      await waitFor(() => expect(setUser).toHaveBeenCalledWith(alice))
      expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ email: 'alice@example.com', name: 'Alice', password: 'correct horse battery' })
      expect(screen.queryByRole('link', { name: 'Log in' })).toBeNull()
    })
  }

  const ordinary: { name: string; setup: Setup | null; heading: string; note: RegExp | null }[] = [
    { name: 'a server with accounts', setup: { first_run: false, signup: 'open' }, heading: 'Log in', note: null },
    { name: 'a server whose setup cannot be had', setup: null, heading: 'Log in', note: null },
    { name: 'a brand-new server with invite-only signup', setup: { first_run: true, signup: 'invite' }, heading: 'Log in', note: /signup is by invite only\. Create the admin account on the server: corral user create/ },
    { name: 'a brand-new server with closed signup', setup: { first_run: true, signup: 'closed' }, heading: 'Log in', note: /signup is closed\./ },
  ]
  for (const c of ordinary) {
    it(`keeps the sign-in page on ${c.name}`, async () => {
      serve(c.setup)
      renderWithSession(<LoginPage />)
      expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe(c.heading)
      expect(screen.getByRole('button', { name: 'Log in' })).toBeTruthy()
      const note = screen.queryByRole('note')
      if (c.note) expect(note?.textContent).toMatch(c.note)
      else expect(note).toBeNull()
    })
  }
})
