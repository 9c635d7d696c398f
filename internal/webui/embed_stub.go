//go:build !ui

package webui

import "testing/fstest"

// dist is a stand-in for the app in binaries built without it.
var dist = fstest.MapFS{"index.html": {Data: []byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Corral</title></head>
<body><main><h1>Corral is running</h1>
<p>This binary was built without the web app. Build it with <code>make run</code> (or
<code>make build</code>), which builds the app and embeds it. The API is under <code>/api</code>;
its description is <a href="/api/openapi.json">/api/openapi.json</a>.</p></main></body></html>
`)}}

const built = false
