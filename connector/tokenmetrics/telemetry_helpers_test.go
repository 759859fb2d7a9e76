package tokenmetrics

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sumInt64Where adds up the data points of an int64 sum whose attribute key equals value.
func sumInt64Where(m metricdata.Metrics, key, value string) int64 {
	var total int64
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
				total += dp.Value
			}
		}
	}
	return total
}

// gaugeInt64Where is the value of an int64 gauge's point whose attribute key equals value.
func gaugeInt64Where(m metricdata.Metrics, key, value string) int64 {
	if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
		for _, dp := range g.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
				return dp.Value
			}
		}
	}
	return -1
}
