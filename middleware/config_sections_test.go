package middleware

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
)

// Every field of Config is filled by exactly one entry of sections, the only place a
// section is named, and every section name is registered.
func TestSectionsBindEveryFieldOnce(t *testing.T) {
	var c Config
	cv := reflect.ValueOf(&c).Elem()
	bound := map[string]int{}
	for _, s := range sections {
		p := reflect.ValueOf(s.target(&c)).Pointer()
		name := ""
		for i := 0; i < cv.NumField(); i++ {
			if cv.Field(i).Addr().Pointer() == p {
				name = cv.Type().Field(i).Name
			}
		}
		require.NotEmpty(t, name, "a section fills something that is not a field of Config")
		bound[name]++
	}
	for i := 0; i < cv.NumField(); i++ {
		assert.Equal(t, 1, bound[cv.Type().Field(i).Name], cv.Type().Field(i).Name)
	}
}

// A loaded section replaces its defaults; an absent one keeps them.
func TestConfigFromCopiesLoadedSections(t *testing.T) {
	title := DefaultTitleConfig()
	title.MaxWords = 9
	got := ConfigFrom(&config.Config{Sections: map[string]any{SectionTitle: &title}})
	want := DefaultConfig()
	want.Title.MaxWords = 9
	assert.Equal(t, want, got)
	assert.Equal(t, DefaultConfig(), ConfigFrom(nil))
	assert.True(t, DefaultConfig().ReadBeforeWrite.Enabled)
	assert.Equal(t, DefaultLoopDetectionConfig(), DefaultConfig().LoopDetection)
}
