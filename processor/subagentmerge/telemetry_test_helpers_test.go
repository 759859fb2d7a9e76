package subagentmerge

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sumInt64 adds up every data point of an int64 sum metric.
func sumInt64(m metricdata.Metrics) int64 {
	var total int64
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			total += dp.Value
		}
	}
	return total
}

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

// gaugeInt64 is the (single) value of an int64 gauge.
func gaugeInt64(m metricdata.Metrics) int64 {
	if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) > 0 {
		return g.DataPoints[0].Value
	}
	return -1
}
