package dottedorder

// FormatTime renders a timestamp as RFC 3339 UTC with microseconds, the precision
// LangSmith stores.
func FormatTime(micros int64) string { return string(AppendTime(make([]byte, 0, TimeLen), micros)) }

// TimeLen is the length of a FormatTime timestamp.
const TimeLen = len("2006-01-02T15:04:05.000000Z")

// AppendTime appends FormatTime(micros).
func AppendTime(b []byte, micros int64) []byte {
	c := civilFromMicros(micros)
	b = appendDigits(b, c.year, 4)
	b = append(b, '-')
	b = appendDigits(b, c.month, 2)
	b = append(b, '-')
	b = appendDigits(b, c.day, 2)
	b = append(b, 'T')
	b = appendDigits(b, c.hour, 2)
	b = append(b, ':')
	b = appendDigits(b, c.min, 2)
	b = append(b, ':')
	b = appendDigits(b, c.sec, 2)
	b = append(b, '.')
	b = appendDigits(b, c.micro, 6)
	return append(b, 'Z')
}

type civil struct{ year, month, day, hour, min, sec, micro int }

// civilFromMicros splits a Unix time in microseconds into UTC calendar fields with
// Howard Hinnant's days-to-civil algorithm: time.Time's Date/Clock were a visible cost
// at three timestamps per run. TestCivilMatchesTime checks it against the time package.
func civilFromMicros(us int64) civil {
	const day = 86400 * 1_000_000
	days := us / day
	rem := us % day
	if rem < 0 {
		rem += day
		days--
	}
	secs := int(rem / 1_000_000)
	c := civil{hour: secs / 3600, min: secs / 60 % 60, sec: secs % 60, micro: int(rem % 1_000_000)}
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	c.day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		c.month = int(mp + 3)
	} else {
		c.month = int(mp - 9)
	}
	c.year = int(yoe + era*400)
	if c.month <= 2 {
		c.year++
	}
	return c
}

// daysFromCivil is the inverse of civilFromMicros' date part (Hinnant's days_from_civil):
// the days since 1970-01-01 of a proleptic Gregorian date.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func appendDigits(dst []byte, v, width int) []byte {
	if v < 0 {
		v = 0
	}
	var buf [8]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}
