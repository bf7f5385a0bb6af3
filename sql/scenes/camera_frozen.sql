-- camera_frozen: a camera repeating its picture: frames differing from the previous one by at
-- most $max_diff (mean absolute luma, 0-255) for at least $min_duration_s. Black frames
-- (mean luma at most $min_luma) are camera_black's, not frozen. Reads scenes/camera_stats;
-- the window starts at the picture that was repeated.
-- score: the duration over $min_duration_s.
WITH frames AS (
    SELECT camera, time_ns, lag(time_ns) OVER o AS prev_ns,
           diff_prev <= $max_diff AND mean_luma > $min_luma AS frozen
    FROM scenes_camera_stats
    WHERE drive = $drive AND mean_luma IS NOT NULL
    WINDOW o AS (PARTITION BY camera ORDER BY time_ns)
),
runs AS (
    SELECT camera, time_ns, prev_ns, coalesce(frozen, false) AS frozen,
           sum(CASE WHEN NOT coalesce(frozen, false) THEN 1 ELSE 0 END)
               OVER (PARTITION BY camera ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM frames
)
SELECT $drive AS drive, min(prev_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
       'camera_frozen' AS tag, (max(time_ns) - min(prev_ns)) / ($min_duration_s * 1e9) AS score
FROM runs
WHERE frozen
GROUP BY camera, run
HAVING max(time_ns) - min(prev_ns) >= $min_duration_s * 1e9
ORDER BY t_start_ns
