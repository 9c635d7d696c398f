// What the browser test's steps share: its log, its failures, and waits
// that are liveness bounds (a generous timeout), never timing assertions.

import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const artifacts = join(dirname(fileURLToPath(import.meta.url)), 'artifacts')
export const WAIT = 30_000 // liveness bound for every wait
const started = Date.now()

export function log(msg) {
  const s = ((Date.now() - started) / 1000).toFixed(1).padStart(5)
  console.log(`[${s}s] ${msg}`)
}

export function fail(msg) {
  throw new Error(msg)
}

/** Polls until check() is truthy; fails with what after WAIT. */
export async function until(what, check) {
  const deadline = Date.now() + WAIT
  let last
  for (;;) {
    try {
      if (await check()) return
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) fail(`timed out after ${WAIT / 1000}s waiting for ${what}${last ? ` (${last.message})` : ''}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export async function visible(locator, what) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout: WAIT })
  } catch {
    fail(`timed out after ${WAIT / 1000}s waiting for ${what}`)
  }
}

export async function hasText(locator, text, what) {
  await until(`${what} to show “${text}”`, async () => ((await locator.first().textContent()) ?? '').includes(text))
}

export async function count(locator, n, what) {
  const got = await locator.count()
  if (got !== n) fail(`expected ${n} of ${what}, found ${got}`)
}

export async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true })
}
