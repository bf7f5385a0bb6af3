-- stop_and_go: at least $min_stops stops starting within $window_s. A stop is a run of poses
-- slower than $stop_speed_mps lasting $min_stop_s or more, with motion before and after it
-- (standing at the drive's start or end is parking, not a stop).
-- Reads calibrated_poses.speed_mps. One row per stop that opens such a cluster, from its start
-- to the end of the cluster's last stop (the catalog merges the overlapping rows).
-- score: the stops in the window over $min_stops.
WITH poses AS (
    SELECT time_ns, speed_mps < $stop_speed_mps AS stopped
    FROM calibrated_poses
    WHERE drive = $drive AND speed_mps IS NOT NULL
),
runs AS (
    SELECT time_ns, stopped,
           sum(CASE WHEN NOT stopped THEN 1 ELSE 0 END)
               OVER (ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run,
           min(time_ns) OVER () AS first_ns, max(time_ns) OVER () AS last_ns
    FROM poses
),
stops AS (
    SELECT min(time_ns) AS t_start, max(time_ns) AS t_end
    FROM runs
    WHERE stopped
    GROUP BY run
    HAVING max(time_ns) - min(time_ns) >= $min_stop_s * 1e9
       AND min(time_ns) > any_value(first_ns) AND max(time_ns) < any_value(last_ns)
),
clusters AS (
    SELECT t_start, count(*) OVER w AS stops, max(t_end) OVER w AS last_end
    FROM stops
    WINDOW w AS (ORDER BY t_start RANGE BETWEEN CURRENT ROW
                                            AND CAST($window_s * 1e9 AS BIGINT) FOLLOWING)
)
SELECT $drive AS drive, t_start AS t_start_ns, last_end AS t_end_ns,
       'stop_and_go' AS tag, stops / $min_stops AS score
FROM clusters
WHERE stops >= $min_stops
ORDER BY t_start_ns
