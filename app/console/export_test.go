package console

// RouteAccess maps "METHOD /console/pattern" to who may call it, for the test
// that walks the mounted router.
func (c *Console) RouteAccess() map[string]string {
	m := map[string]string{}
	for _, rt := range c.routes() {
		m[rt.method+" "+Prefix+rt.pattern] = rt.access.String()
	}
	return m
}

// OpenStreams is how many event streams are being served.
func (c *Console) OpenStreams() int64 { return c.streams.Load() }
