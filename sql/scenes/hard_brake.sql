-- hard_brake: the vehicle slowing faster than $decel_mps2 for at least $min_duration_s.
-- Reads calibrated_poses.speed_mps (ground truth or GNSS/IMU fusion, the same for every
-- source). The deceleration at a pose is the speed change across a centred window of
-- $window_s (from the first pose in it to the last; two ASOF joins), so one noisy pose cannot
-- brake hard. score: the strongest deceleration over $decel_mps2.
WITH poses AS (
    SELECT time_ns, speed_mps
    FROM calibrated_poses
    WHERE drive = $drive AND speed_mps IS NOT NULL
),
decel AS (
    SELECT p.time_ns,
           (b.speed_mps - a.speed_mps) / ((a.time_ns - b.time_ns) / 1e9) AS decel
    FROM poses p
    ASOF JOIN poses a ON a.time_ns <= p.time_ns + CAST($window_s * 5e8 AS BIGINT)
    ASOF JOIN poses b ON b.time_ns >= p.time_ns - CAST($window_s * 5e8 AS BIGINT)
    WHERE a.time_ns > b.time_ns
),
runs AS (
    SELECT time_ns, decel, decel >= $decel_mps2 AS hit,
           sum(CASE WHEN decel >= $decel_mps2 THEN 0 ELSE 1 END)
               OVER (ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM decel
)
SELECT $drive AS drive, min(time_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
       'hard_brake' AS tag, max(decel) / $decel_mps2 AS score
FROM runs
WHERE hit
GROUP BY run
HAVING max(time_ns) - min(time_ns) >= $min_duration_s * 1e9
ORDER BY t_start_ns
