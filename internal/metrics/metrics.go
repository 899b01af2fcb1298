// Package metrics serves the worker's Prometheus /metrics: the Temporal
// SDK's worker and client metrics, toolgate's own counters (emitted from
// the workflow through the SDK's replay-safe metrics handler), and the
// number of pending approvals read from pending_action at scrape time.
package metrics

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.uber.org/zap"
)

// Metrics is one Prometheus registry fed by the SDK and by toolgate.
type Metrics struct {
	// SDK goes in client.Options.MetricsHandler; workflows reach it through
	// workflow.GetMetricsHandler.
	SDK      client.MetricsHandler
	registry *prometheus.Registry
}

// New builds the registry. With a pool, toolgate_pending_approvals counts
// pending, unexpired cards whenever /metrics is scraped.
func New(pool *pgxpool.Pool, log *zap.Logger) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	meter := provider.Meter("toolgate")
	m := &Metrics{registry: reg, SDK: temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:   meter,
		OnError: func(err error) { log.Warn("metric not recorded", zap.Error(err)) },
	})}
	if pool != nil {
		_, err := meter.Int64ObservableGauge("toolgate_pending_approvals",
			metric.WithDescription("Cards waiting for a decision, not yet expired."),
			metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
				var n int64
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE status = 'pending_approval' AND expires_at > now()`).Scan(&n); err != nil {
					return err
				}
				o.Observe(n)
				return nil
			}))
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
