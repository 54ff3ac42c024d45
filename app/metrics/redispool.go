package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// RedisPool reports the go-redis client's connection pool at scrape time:
// connections reused (hits) or dialled (misses), waits for a free one and how
// long they took, waits that gave up (timeouts), connections dropped as stale
// or unusable, and how many are open and idle. A steady rise in misses under
// load is connections being closed and redialled, which is what a call that
// ran past its deadline used to cost.
func RedisPool(stats func() *redis.PoolStats) prometheus.Collector {
	return redisPool{stats: stats, descs: map[string]*prometheus.Desc{
		"hits":     prometheus.NewDesc("tollgate_redis_pool_hits_total", "Redis calls that found an idle pooled connection.", nil, nil),
		"misses":   prometheus.NewDesc("tollgate_redis_pool_misses_total", "Redis calls that had to dial a new connection.", nil, nil),
		"timeouts": prometheus.NewDesc("tollgate_redis_pool_timeouts_total", "Redis calls that gave up waiting for a pooled connection.", nil, nil),
		"waits":    prometheus.NewDesc("tollgate_redis_pool_waits_total", "Redis calls that waited for a pooled connection.", nil, nil),
		"wait":     prometheus.NewDesc("tollgate_redis_pool_wait_seconds_total", "Time Redis calls spent waiting for a pooled connection.", nil, nil),
		"unusable": prometheus.NewDesc("tollgate_redis_pool_unusable_total", "Pooled connections found unusable when taken.", nil, nil),
		"stale":    prometheus.NewDesc("tollgate_redis_pool_stale_conns_total", "Pooled connections closed as stale (idle or too old).", nil, nil),
		"conns":    prometheus.NewDesc("tollgate_redis_pool_conns", "Open Redis connections, by state (total, idle).", []string{"state"}, nil),
	}}
}

type redisPool struct {
	stats func() *redis.PoolStats
	descs map[string]*prometheus.Desc
}

func (p redisPool) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d
	}
}

func (p redisPool) Collect(ch chan<- prometheus.Metric) {
	s := p.stats()
	if s == nil {
		return
	}
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(p.descs[name], prometheus.CounterValue, v)
	}
	counter("hits", float64(s.Hits))
	counter("misses", float64(s.Misses))
	counter("timeouts", float64(s.Timeouts))
	counter("waits", float64(s.WaitCount))
	counter("wait", time.Duration(s.WaitDurationNs).Seconds())
	counter("unusable", float64(s.Unusable))
	counter("stale", float64(s.StaleConns))
	ch <- prometheus.MustNewConstMetric(p.descs["conns"], prometheus.GaugeValue, float64(s.TotalConns), "total")
	ch <- prometheus.MustNewConstMetric(p.descs["conns"], prometheus.GaugeValue, float64(s.IdleConns), "idle")
}
