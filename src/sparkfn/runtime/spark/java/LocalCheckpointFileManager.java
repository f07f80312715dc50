package sparkfn.spark;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint file manager, whose temp files on a local file system
 * are opened as plain files.
 *
 * <p>Without Hadoop's native library, RawLocalFileSystem sets a new file's permissions by
 * running {@code chmod} in a child process of the JVM: one per checkpoint file, two files per
 * micro-batch of every streaming query. A plain {@link FileOutputStream} gives the file the
 * process's umask, which is what that chmod sets. Every other step (the rename into place,
 * listing, deleting old batches) is Spark's own.
 */
public class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

  public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
    super(path, hadoopConf);
  }

  @Override
  public FSDataOutputStream createTempFile(Path path) {
    FileSystem fs = fs();
    if (!(fs instanceof RawLocalFileSystem)) {
      return super.createTempFile(path);
    }
    File file = ((RawLocalFileSystem) fs).pathToFile(path);
    try {
      File parent = file.getParentFile();
      if (parent != null && !parent.isDirectory() && !parent.mkdirs() && !parent.isDirectory()) {
        throw new IOException("could not create the directory " + parent);
      }
      return new FSDataOutputStream(new FileOutputStream(file, false), null);
    } catch (IOException e) {
      throw LocalCheckpointFileManager.<RuntimeException>rethrow(e);
    }
  }

  /** Throws {@code e} as it is: Scala's callers catch IOException, which Java must declare. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E rethrow(Throwable e) throws E {
    throw (E) e;
  }
}
