package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// benchTranscriptBytes is the size of the benchmark transcript (≥ 50 MB).
const benchTranscriptBytes = 50 << 20

var benchData = sync.OnceValues(func() ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(fixtureDir(), "*.ndjson"))
	if err != nil || len(files) == 0 {
		return nil, err
	}
	var one []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		one = append(one, b...)
		if len(one) > 0 && one[len(one)-1] != '\n' {
			one = append(one, '\n')
		}
	}
	out := make([]byte, 0, benchTranscriptBytes+len(one))
	for len(out) < benchTranscriptBytes {
		out = append(out, one...)
	}
	return out, nil
})

func loadBenchData(b *testing.B) []byte {
	b.Helper()
	data, err := benchData()
	if err != nil || len(data) == 0 {
		b.Fatalf("build the benchmark transcript from %s: %v", fixtureDir(), err)
	}
	return data
}

// BenchmarkReader measures the stream parser: Reader over a ≥ 50 MB
// transcript built from the recorded fixtures, every line typed. Target:
// ≥ 50 MB/s, 100 times the rate the CLI writes at (a few hundred KB a turn).
func BenchmarkReader(b *testing.B) {
	data := loadBenchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), ReaderOptions{})
		n := 0
		for r.Next() {
			n++
		}
		if r.Err() != nil || r.Stats().MalformedLines != 0 || n == 0 {
			b.Fatalf("read: %v, stats %+v", r.Err(), r.Stats())
		}
	}
}

// BenchmarkBaselineMapDecode is the baseline: each line decoded into a
// map[string]any with encoding/json.
func BenchmarkBaselineMapDecode(b *testing.B) {
	data := loadBenchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		baselineDecode(b, data)
	}
}

// BenchmarkReaderVsBaseline runs the two alternately on the same transcript
// (fair on a machine whose load changes) and reports both throughputs and
// their ratio: reader-MB/s, baseline-MB/s, x-baseline.
func BenchmarkReaderVsBaseline(b *testing.B) {
	data := loadBenchData(b)
	var readerTime, baseTime time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		r := NewReader(bytes.NewReader(data), ReaderOptions{})
		for r.Next() {
		}
		t1 := time.Now()
		baselineDecode(b, data)
		readerTime += t1.Sub(t0)
		baseTime += time.Since(t1)
		n++
	}
	mb := float64(len(data)) * float64(n) / 1e6
	b.ReportMetric(mb/readerTime.Seconds(), "reader-MB/s")
	b.ReportMetric(mb/baseTime.Seconds(), "baseline-MB/s")
	b.ReportMetric(baseTime.Seconds()/readerTime.Seconds(), "x-baseline")
}

func baselineDecode(b *testing.B, data []byte) {
	sc := bufio.NewReader(bytes.NewReader(data))
	for {
		line, err := sc.ReadSlice('\n')
		if len(line) > 0 {
			var m map[string]any
			if json.Unmarshal(line, &m) != nil {
				b.Fatal("baseline decode failed")
			}
		}
		if err != nil {
			return
		}
	}
}
