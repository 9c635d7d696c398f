// The app: who is signed in, the page frame, and which page a path shows.

import { useEffect, useState } from 'react'
import { api, setUnauthenticatedHandler } from './api'
import { ErrorText, Loading } from './feedback'
import { Link, match, navigate, useLocation } from './router'
import { SessionContext, safeNext } from './session'
import type { User } from './types'
import { LoginPage, SignupPage } from './pages/Auth'
import { AgentsPage } from './pages/Agents'
import { SettingsPage } from './pages/Settings'
import { NewAgentPage } from './pages/NewAgent'
import { AgentPage } from './pages/Agent'
import { RunPage } from './pages/Run'
import { ChangePage } from './pages/Change'
import { AcceptLinkPage } from './pages/AcceptLink'
import { CredentialsPage } from './pages/Credentials'
import { LibraryPage } from './pages/Library'
import { InboxPage } from './pages/Inbox'
import { AdminPage } from './pages/Admin'
import { WaitingBadge } from './WaitingBadge'
import { inboxStaleEvent } from './review'

/** How often the header asks again how many change sets wait (besides on every navigation). */
const inboxPollMs = 30_000

/**
 * How many change sets wait for the signed-in person: asked on sign-in, on
 * every navigation, whenever a page says it may have moved (inboxStale: an
 * agent's count changed, a change set was decided) and every half minute
 * while the page is visible. A failed ask keeps the last count.
 */
function useInboxCount(signedIn: boolean, path: string): [number, (n: number) => void] {
  const [count, setCount] = useState(0)
  useEffect(() => {
    if (!signedIn) {
      setCount(0)
      return
    }
    let live = true
    const ask = () => {
      if (document.hidden) return
      api
        .inbox()
        .then((items) => live && setCount(items.length))
        .catch(() => {})
    }
    ask()
    const t = setInterval(ask, inboxPollMs)
    window.addEventListener(inboxStaleEvent, ask)
    return () => {
      live = false
      clearInterval(t)
      window.removeEventListener(inboxStaleEvent, ask)
    }
  }, [signedIn, path])
  return [count, setCount]
}

export function App() {
  const [user, setUser] = useState<User | null | undefined>(undefined)
  const [bootError, setBootError] = useState<unknown>()
  const { path, query } = useLocation()

  useEffect(() => {
    setUnauthenticatedHandler(() => {
      setUser(null)
      const here = window.location.pathname + window.location.search
      if (!here.startsWith('/login') && !here.startsWith('/signup')) {
        navigate(`/login?next=${encodeURIComponent(here)}`, { replace: true })
      }
    })
    api
      .me()
      .then(setUser)
      .catch((err) => {
        if (err?.status === 401) setUser(null)
        else {
          setBootError(err)
          setUser(null)
        }
      })
  }, [])

  const publicPage = path === '/login' || path === '/signup'
  const [waiting, setWaiting] = useInboxCount(!!user, path)

  useEffect(() => {
    if (user === undefined) return
    if (user === null && !publicPage) {
      navigate(`/login?next=${encodeURIComponent(path + (query.size ? `?${query}` : ''))}`, { replace: true })
    } else if (user !== null && publicPage) {
      navigate(safeNext(query.get('next')), { replace: true })
    }
  }, [user, publicPage, path, query])

  async function logout() {
    try {
      await api.logout()
    } finally {
      setUser(null)
      navigate('/login')
    }
  }

  return (
    <SessionContext.Provider value={{ user: user ?? null, setUser }}>
      <header className="top">
        <Link to="/" className="brand">
          Corral
        </Link>
        {user && (
          <nav aria-label="Main">
            <Link to="/" aria-current={path === '/' ? 'page' : undefined}>
              Agents
            </Link>
            <Link to="/library" aria-current={path === '/library' ? 'page' : undefined}>
              Library
            </Link>
            <Link to="/inbox" aria-current={path === '/inbox' ? 'page' : undefined}>
              Inbox
              <WaitingBadge n={waiting} title={`${waiting} change set${waiting === 1 ? '' : 's'} waiting for your review`} />
            </Link>
            {user.admin && (
              <Link to="/admin" aria-current={path === '/admin' ? 'page' : undefined}>
                Admin
              </Link>
            )}
          </nav>
        )}
        <div className="whoami">
          {user && (
            <>
              <span>
                Signed in as <strong>{user.name}</strong>
              </span>
              <nav aria-label="Account">
                <Link to="/credentials" aria-current={path === '/credentials' ? 'page' : undefined}>
                  Credentials
                </Link>
              </nav>
              <button type="button" className="secondary" onClick={logout}>
                Log out
              </button>
            </>
          )}
        </div>
      </header>
      <main>
        <ErrorText error={bootError} />
        {user === undefined ? <Loading what="your account" /> : <Page path={path} signedIn={user !== null} onInboxCount={setWaiting} />}
      </main>
    </SessionContext.Provider>
  )
}

function Page({ path, signedIn, onInboxCount }: { path: string; signedIn: boolean; onInboxCount: (n: number) => void }) {
  if (path === '/login') return <LoginPage />
  if (path === '/signup') return <SignupPage />
  if (!signedIn) return null // on the way to /login
  let p: Record<string, string> | null
  if (path === '/') return <AgentsPage />
  if (match('/agents/new', path)) return <NewAgentPage />
  if (path === '/credentials') return <CredentialsPage />
  if (path === '/library') return <LibraryPage />
  if (path === '/inbox') return <InboxPage onCount={onInboxCount} />
  if (path === '/admin') return <AdminPage />
  if ((p = match('/agents/:id/settings', path))) return <SettingsPage key={p.id} id={p.id} />
  if ((p = match('/agents/:id', path))) return <AgentPage key={p.id} id={p.id} />
  if ((p = match('/runs/:id', path))) return <RunPage key={p.id} id={p.id} />
  if ((p = match('/changes/:id', path))) return <ChangePage key={p.id} id={p.id} />
  if ((p = match('/links/:token', path))) return <AcceptLinkPage key={p.token} token={p.token} />
  return (
    <div className="notice">
      <h1>Page not found</h1>
      <p>There is nothing at this address.</p>
      <p>
        <Link to="/">Back to your agents</Link>
      </p>
    </div>
  )
}
