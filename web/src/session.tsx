// Who is signed in, for every page.

import { createContext, useContext } from 'react'
import type { User } from './types'

export interface Session {
  user: User | null
  setUser: (u: User | null) => void
}

export const SessionContext = createContext<Session>({ user: null, setUser: () => {} })

export function useSession(): Session {
  return useContext(SessionContext)
}

/** Where to go after logging in: a path inside the app, never another site. */
export function safeNext(next: string | null): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/'
  if (next.startsWith('/login') || next.startsWith('/signup')) return '/'
  return next
}
