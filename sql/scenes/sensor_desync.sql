-- sensor_desync: a sensor out of step with the lidar key frames: consecutive frames of
-- calibrated_frames whose nearest sample of that sensor is beyond the sync tolerance (the
-- calibrated layer's sync check, ok = false), lasting at least $min_duration_s. Isolated
-- outliers (jitter, a pair of NCLT GPS rows) are below that. A sensor that stops delivering
-- (a GNSS outage) is out of step too, so its scenes also carry this tag.
-- score: the duration over $min_duration_s.
WITH matches AS (
    SELECT stream AS lidar, time_ns, unnest(matches) AS m
    FROM calibrated_frames
    WHERE drive = $drive
),
frames AS (
    SELECT lidar, m.sensor AS sensor, time_ns, m.ok AS ok,
           abs(m.dt_ns) / greatest(m.tolerance_ns, 1) AS ratio
    FROM matches
    WHERE m.time_ns IS NOT NULL
),
runs AS (
    SELECT lidar, sensor, time_ns, ok, ratio,
           sum(CASE WHEN ok THEN 1 ELSE 0 END)
               OVER (PARTITION BY lidar, sensor ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM frames
)
SELECT $drive AS drive, min(time_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
       'sensor_desync' AS tag, (max(time_ns) - min(time_ns)) / ($min_duration_s * 1e9) AS score
FROM runs
WHERE NOT ok
GROUP BY lidar, sensor, run
HAVING max(time_ns) - min(time_ns) >= $min_duration_s * 1e9
ORDER BY t_start_ns
