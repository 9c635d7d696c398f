// A last line of defence: a page that throws while rendering shows what
// happened and a way on, never a blank screen.

import { Component, type ReactNode } from 'react'

interface Props {
  children: ReactNode
}

interface State {
  error: Error | null
}

export class ErrorBoundary extends Component<Props, State> {
  state: State = { error: null }

  static getDerivedStateFromError(error: Error): State {
    return { error }
  }

  render() {
    if (this.state.error === null) return this.props.children
    return (
      <main>
        <h1>Something went wrong on this page</h1>
        <p role="alert">The page could not be shown: {this.state.error.message || 'an unexpected error'}.</p>
        <p>
          <a href="/">Back to your agents</a> or reload the page. If it happens again, the server's log may say more.
        </p>
      </main>
    )
  }
}
