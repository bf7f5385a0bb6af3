-- sharp_turn: a yaw rate above $yaw_rate_rps (either way) for at least $min_duration_s.
-- Reads calibrated_poses.yaw_rad (base_link in the map, the same for every source). The rate
-- at a pose is the heading change across a centred window of $window_s (first to last pose in
-- it; two ASOF joins), wrapped to (-pi, pi]: right for any rate below 2 pi / $window_s.
-- score: the highest yaw rate over $yaw_rate_rps.
WITH poses AS (
    SELECT time_ns, yaw_rad
    FROM calibrated_poses
    WHERE drive = $drive AND yaw_rad IS NOT NULL
),
rate AS (
    SELECT p.time_ns,
           abs(atan2(sin(a.yaw_rad - b.yaw_rad), cos(a.yaw_rad - b.yaw_rad)))
               / ((a.time_ns - b.time_ns) / 1e9) AS rate
    FROM poses p
    ASOF JOIN poses a ON a.time_ns <= p.time_ns + CAST($window_s * 5e8 AS BIGINT)
    ASOF JOIN poses b ON b.time_ns >= p.time_ns - CAST($window_s * 5e8 AS BIGINT)
    WHERE a.time_ns > b.time_ns
),
runs AS (
    SELECT time_ns, rate, rate >= $yaw_rate_rps AS hit,
           sum(CASE WHEN rate >= $yaw_rate_rps THEN 0 ELSE 1 END)
               OVER (ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM rate
)
SELECT $drive AS drive, min(time_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
       'sharp_turn' AS tag, max(rate) / $yaw_rate_rps AS score
FROM runs
WHERE hit
GROUP BY run
HAVING max(time_ns) - min(time_ns) >= $min_duration_s * 1e9
ORDER BY t_start_ns
