-- camera_black: at least $min_frames consecutive frames of a camera that are black: mean
-- luma at most $max_luma and spread at most $max_std (a dark scene still has texture).
-- Reads scenes/camera_stats (made by the scene_catalog asset from the camera frames).
-- score: the black frames over $min_frames.
WITH frames AS (
    SELECT camera, time_ns, mean_luma <= $max_luma AND luma_std <= $max_std AS black
    FROM scenes_camera_stats
    WHERE drive = $drive AND mean_luma IS NOT NULL
),
runs AS (
    SELECT camera, time_ns, black,
           sum(CASE WHEN NOT black THEN 1 ELSE 0 END)
               OVER (PARTITION BY camera ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM frames
)
SELECT $drive AS drive, min(time_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
       'camera_black' AS tag, count(*) / $min_frames AS score
FROM runs
WHERE black
GROUP BY camera, run
HAVING count(*) >= $min_frames
ORDER BY t_start_ns
