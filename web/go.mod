module corral/web

// keeps the go tool out of node_modules
