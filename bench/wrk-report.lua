-- wrk-report.lua - wrk script with only a done() hook (keeps wrk's fast static-request path).
-- Prints one machine-readable line for bench/lib.sh:
-- RESULT requests duration_us bytes non2xx3xx connect_err read_err write_err timeouts p50_ms p99_ms
done = function(s, lat, req)
  local e = s.errors
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %.3f %.3f\n",
    s.requests, s.duration, s.bytes, e.status, e.connect, e.read, e.write, e.timeout,
    lat:percentile(50) / 1000, lat:percentile(99) / 1000))
end
