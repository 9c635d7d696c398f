// A small router on the History API: paths, not hashes, so every page has
// a real URL (the server answers index.html for any path that is not /api).

import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from 'react'

const changed = 'corral:navigate'

function subscribe(cb: () => void): () => void {
  window.addEventListener('popstate', cb)
  window.addEventListener(changed, cb)
  return () => {
    window.removeEventListener('popstate', cb)
    window.removeEventListener(changed, cb)
  }
}

function snapshot(): string {
  return window.location.pathname + window.location.search
}

/** The current path and query, re-rendering on every navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const url = useSyncExternalStore(subscribe, snapshot, snapshot)
  const q = url.indexOf('?')
  return {
    path: q >= 0 ? url.slice(0, q) : url,
    query: new URLSearchParams(q >= 0 ? url.slice(q) : ''),
  }
}

/** Goes to to (a path, optionally with a query), adding a history entry unless replace. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === snapshot()) return
  if (opts.replace) window.history.replaceState(null, '', to)
  else window.history.pushState(null, '', to)
  window.scrollTo?.(0, 0)
  window.dispatchEvent(new Event(changed))
}

/** Matches path against a pattern such as /agents/:id; the params, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean)
  const s = path.split('/').filter(Boolean)
  if (p.length !== s.length) return null
  const params: Record<string, string> = {}
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) {
      try {
        params[p[i].slice(1)] = decodeURIComponent(s[i])
      } catch {
        return null
      }
    } else if (p[i] !== s[i]) {
      return null
    }
  }
  return params
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }

/** An <a> that navigates in the app; a modified click (new tab) is left to the browser. */
export function Link({ to, onClick, ...rest }: LinkProps) {
  function handle(e: MouseEvent<HTMLAnchorElement>) {
    onClick?.(e)
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
    e.preventDefault()
    navigate(to)
  }
  return <a href={to} onClick={handle} {...rest} />
}
